package admin_test

import (
	"net/http"
	"testing"

	"github.com/go-redis/redis_rate/v10"

	"github.com/webhookd/webhookd/admin"
)

// TestTriggerSpendsTheTestEventBudget: a trigger sends the merchant's
// endpoints a made-up event, as send_test_event does, so both spend one
// per-merchant budget; another merchant's budget is its own.
func TestTriggerSpendsTheTestEventBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withIngestPipeline(t), func(c *admin.Config) { c.TestEventRate = redis_rate.PerMinute(2) })
	key, other := h.merchant("m1"), h.merchant("m2")
	sub := h.createSubscription(key, hookBody("https://example.com/hook", "payout.paid"))
	trigger := request{Method: http.MethodPost, Path: "/v1/event_types/payout.paid/trigger", Key: key}
	steps := []struct {
		name string
		req  request
		want int
	}{
		{"send_test_event", request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID + "/send_test_event", Key: key}, http.StatusAccepted},
		{"first trigger", trigger, http.StatusAccepted},
		{"trigger past the budget", trigger, http.StatusTooManyRequests},
		{"another merchant's trigger", request{Method: http.MethodPost, Path: trigger.Path, Key: other}, http.StatusAccepted},
	}
	for _, s := range steps {
		r := h.do(s.req)
		if r.Status != s.want {
			t.Fatalf("%s = %d %s, want %d", s.name, r.Status, r.Body, s.want)
		}
		if s.want == http.StatusTooManyRequests {
			expectError(t, r, http.StatusTooManyRequests, "rate_limit_exceeded")
		}
	}
}
