package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/producer"
)

// TestRateLimitOnCluster: the API limit (redis_rate's Lua script, on one
// key per API key) works on a Redis Cluster, each key counted on its own
// node.
func TestRateLimitOnCluster(t *testing.T) {
	t.Parallel()
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

// TestListenRelayOnCluster: a listener's connection takes its deliveries
// from, and pushes its answers to, lists on a Redis Cluster (single-key
// commands and transactions, on whichever node holds each list), woken by
// the publish made in one transaction with the push (the channel's hash
// tag puts it in the list's slot).
func TestListenRelayOnCluster(t *testing.T) {
	t.Parallel()
	cluster := storetest.NewCluster(t)
	conn, err := producer.ParseRedisURL(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	rc := conn.NewClient()
	t.Cleanup(func() { rc.Close() })
	h := newHarness(t, func(c *admin.Config) { c.Redis = rc })
	key := h.merchant("m_cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws, ready := h.dialListen(ctx, key, "")
	for i := range 3 {
		d := listener.Delivery{Type: listener.TypeDelivery, ID: uuid.NewString(), EventID: uuid.NewString(), EventType: "payout.paid",
			Body: `{"type":"payout.paid"}`, Deadline: time.Now().Add(time.Minute)}
		if err := relayOn(ctx, rc, ready.ListenerID, d); err != nil {
			t.Fatal(err)
		}
		var got listener.Delivery
		readJSON(ctx, t, ws, &got)
		if got.ID != d.ID {
			t.Fatalf("delivery %d on the socket = %+v, want %s", i, got, d.ID)
		}
		writeJSON(ctx, t, ws, listener.Answer{Type: listener.TypeAnswer, ID: d.ID, Status: 200 + i, DurationMS: 1})
		popped, err := rc.BLPop(ctx, 10*time.Second, listener.AnswerKey(d.ID)).Result()
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		var a listener.Answer
		if err := json.Unmarshal([]byte(popped[1]), &a); err != nil || a.Status != 200+i {
			t.Errorf("answer %d = %+v (%v)", i, a, err)
		}
	}
}
