package deliver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
)

// TestSendWithCustomAndOrderingHeaders: an ordered delivery to a
// subscription with its own headers carries both, and the subscription's
// headers never replace ours.
func TestSendWithCustomAndOrderingHeaders(t *testing.T) {
	got := make(chan http.Header, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer receiver.Close()
	snd, err := NewSender(SenderConfig{Timeout: 2 * time.Second, AllowHTTP: true, AllowPrivate: true,
		MaxConns: 4, MaxConnsPerHost: 1, Version: "test"}, clock.System{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, seq := "acct_1", int64(7)
	custom := map[string]string{"Authorization": "Bearer x", "X-Tenant": "t1"}
	res, err := snd.Send(context.Background(), Request{Target: receiver.URL, EventID: "evt_1", Body: []byte(`{}`), Headers: custom,
		Ordering: orderingHeaders(store.Delivery{OrderingKey: &key, Sequence: &seq})})
	if err != nil || !res.OK() {
		t.Fatalf("send = %v", res.ErrCode)
	}
	h := <-got
	for name, want := range map[string]string{
		"Authorization": "Bearer x", "X-Tenant": "t1",
		headerOrderingKey: "acct_1", headerSequence: "7",
		"Content-Type": "application/json", "Webhook-Id": "evt_1",
	} {
		if h.Get(name) != want {
			t.Errorf("%s = %q, want %q", name, h.Get(name), want)
		}
	}
}
