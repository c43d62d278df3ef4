package admin_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/dispatcher/publish"
)

// Every change of a merchant's subscriptions or settings made through the
// API is announced on publish.SubscriptionsChangedChannel once committed
// and before it is answered, so that the publishes of every process read
// it (dispatcher/publish's TestChangesReachTheOtherProcesssPublishes
// follows an announcement to another process's publish).
func TestChangesOfSubscriptionsAreAnnounced(t *testing.T) {
	t.Parallel()
	h := newIngestHarness(t)
	key := h.merchant("m1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ps := h.redis.Subscribe(ctx, publish.SubscriptionsChangedChannel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	var path string
	for _, step := range []struct {
		name string
		do   func() response
		want int
	}{
		{"create", func() response {
			r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
				Body: map[string]any{"url": "https://example.com/hooks", "events": []string{"*"}, "filter": `payload.status == "paid"`}})
			if r.Status == http.StatusCreated {
				path = "/v1/webhook_subscriptions/" + decode[subscription](t, r).ID
			}
			return r
		}, http.StatusCreated},
		{"update the filter", func() response {
			return h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: map[string]any{"filter": `payload.status == "failed"`}})
		}, http.StatusOK},
		{"disable", func() response {
			return h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: map[string]any{"status": "disabled"}})
		}, http.StatusOK},
		{"delete", func() response { return h.do(request{Method: http.MethodDelete, Path: path, Key: key}) }, http.StatusNoContent},
		{"pin another api_version", func() response {
			return h.doInternal(request{Method: http.MethodPut, Path: "/internal/v1/merchants/m1", Body: map[string]any{"api_version": admin.DefaultVersion}})
		}, http.StatusOK},
	} {
		if r := step.do(); r.Status != step.want {
			t.Fatalf("%s: %d %s, want %d", step.name, r.Status, r.Body, step.want)
		}
		if _, err := ps.ReceiveMessage(ctx); err != nil {
			t.Fatalf("%s: no announcement: %v", step.name, err)
		}
	}
}
