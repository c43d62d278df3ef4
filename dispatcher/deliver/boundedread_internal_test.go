package deliver

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// TestSQSAnswerIsBounded: an SQS endpoint (a merchant's custom one) that
// answers SendMessage with a body that never ends, or says it is 64 MiB,
// fails the attempt with response_too_large, and reading stops at the
// bound: the server gets to write little more than the bound (what the
// sockets' buffers hold), not the 64 MiB it offers.
func TestSQSAnswerIsBounded(t *testing.T) {
	const offered = 64 << 20
	sealer, err := signer.NewSealer(bytes.Repeat([]byte{5}, 32))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		// declared is the Content-Length it sends; 0: chunked, no end.
		declared bool
	}{
		{name: "endless chunked body"},
		{name: "64 MiB declared", declared: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var written atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				if c.declared {
					w.Header().Set("Content-Length", "67108864")
				}
				w.WriteHeader(http.StatusOK)
				chunk := []byte(`{"MessageId":"` + strings.Repeat("a", 64<<10))
				for written.Load() < offered {
					n, err := w.Write(chunk[:min(len(chunk), int(offered-written.Load()))])
					written.Add(int64(n))
					if err != nil {
						return
					}
					chunk = bytes.Repeat([]byte("a"), 64<<10)
				}
			}))
			defer srv.Close()
			sealed, err := sealer.Seal(`{"type":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/q","region":"eu-west-1",` +
				`"endpoint":"` + srv.URL + `","access_key_id":"AKIAMERCHANT","secret_access_key":"merchant-secret"}`)
			if err != nil {
				t.Fatal(err)
			}
			ds := newDestinations(SenderConfig{Timeout: 10 * time.Second, AllowHTTP: true, AllowPrivate: true, MaxConns: 4, MaxConnsPerHost: 2,
				Version: "test"}, nil, sealer, clock.System{})
			defer ds.closeAll()
			res, err := ds.send(context.Background(), store.LeasedDelivery{Delivery: store.Delivery{ID: uuid.New(), EventID: uuid.New(),
				SubscriptionID: uuid.New()}, Body: []byte(`{}`), SealedDestination: sealed}, Signing{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.ErrCode == nil || *res.ErrCode != errResponseTooLarge {
				t.Fatalf("error %v, body %q; want %s", res.ErrCode, res.Body, errResponseTooLarge)
			}
			// The server's writes stop once the client stops reading and
			// the connection closes: the bound plus what the sockets buffer.
			ds.closeAll()
			if w := written.Load(); w > maxServiceAnswer+16<<20 {
				t.Errorf("the server wrote %d bytes; reading should stop near %d", w, maxServiceAnswer)
			}
		})
	}
}
