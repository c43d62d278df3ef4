package deliver

import (
	"testing"

	"github.com/webhookd/webhookd/internal/store"
)

func TestOrderingHeaders(t *testing.T) {
	key, seq := "acct_1", int64(42)
	if h := orderingHeaders(store.Delivery{}); h != nil {
		t.Fatalf("an unordered delivery has headers %v", h)
	}
	h := orderingHeaders(store.Delivery{OrderingKey: &key, Sequence: &seq})
	if h.Get("webhook-ordering-key") != "acct_1" || h.Get("webhook-sequence") != "42" {
		t.Fatalf("headers %v", h)
	}
	for _, tc := range []struct {
		d      store.Delivery
		status store.DeliveryStatus
		ends   bool
	}{
		{store.Delivery{OrderingKey: &key, Sequence: &seq}, store.DeliverySucceeded, true},
		{store.Delivery{OrderingKey: &key, Sequence: &seq}, store.DeliveryFailed, true},
		{store.Delivery{OrderingKey: &key, Sequence: &seq}, store.DeliveryPending, false},
		{store.Delivery{}, store.DeliverySucceeded, false},
	} {
		if got := endsLine(tc.d, tc.status); got != tc.ends {
			t.Errorf("endsLine(sequence %v, %s) = %v", tc.d.Sequence, tc.status, got)
		}
	}
}
