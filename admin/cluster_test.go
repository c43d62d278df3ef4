package admin_test

import (
	"net/http"
	"testing"

	"github.com/go-redis/redis_rate/v10"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/store/storetest"
)

// TestRateLimitOnCluster: the API limit (redis_rate's Lua script, on one
// key per API key) works on a Redis Cluster, each key counted on its own
// node.
func TestRateLimitOnCluster(t *testing.T) {
	cluster := storetest.NewCluster(t)
	conn, err := producer.ParseRedisURL(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	rc := conn.NewClient()
	t.Cleanup(func() { rc.Close() })
	h := newHarness(t, func(c *admin.Config) {
		c.Redis = rc
		c.APIRate = redis_rate.PerMinute(2)
	})
	for _, merchant := range []string{"m_cluster_a", "m_cluster_b", "m_cluster_c", "m_cluster_d"} {
		key := h.merchant(merchant)
		for range 2 {
			if r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key}); r.Status != http.StatusOK {
				t.Fatalf("%s: a read within the limit: %d %s", merchant, r.Status, r.Body)
			}
		}
		r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key})
		expectError(t, r, http.StatusTooManyRequests, "rate_limit_exceeded")
	}
	if got := gatheredCounter(t, h, "webhookd_rate_limiter_errors_total", "api"); got != 0 {
		t.Errorf("api limiter errors = %v, want 0", got)
	}
	r := h.doInternal(request{Method: http.MethodGet, Path: "/readyz"})
	if r.Status != http.StatusOK {
		t.Errorf("/readyz on a Cluster: %d %s", r.Status, r.Body)
	}
}
