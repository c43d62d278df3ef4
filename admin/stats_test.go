package admin_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/admin"
)

type statsCounts struct {
	Attempts  int      `json:"attempts"`
	Succeeded int      `json:"succeeded"`
	Retrying  int      `json:"retrying"`
	Failed    int      `json:"failed"`
	P50MS     *float64 `json:"p50_ms"`
	P95MS     *float64 `json:"p95_ms"`
}

type endpointStats struct {
	SubscriptionID string    `json:"subscription_id"`
	Window         string    `json:"window"`
	BucketSeconds  int       `json:"bucket_seconds"`
	From           time.Time `json:"from"`
	To             time.Time `json:"to"`
	Totals         struct {
		statsCounts
		SuccessRate *float64 `json:"success_rate"`
	} `json:"totals"`
	Buckets []struct {
		Start time.Time `json:"start"`
		statsCounts
	} `json:"buckets"`
}

// TestEndpointStats: on known attempts, each window answers its buckets
// with the attempts where they fell, by outcome, test deliveries left out;
// a read-only key and a viewing portal session may read them; another
// merchant's subscription, a missing one and a window not offered are
// refused in the API's error format.
func TestEndpointStats(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m_stats")
	readOnly := h.merchant("m_stats", admin.ScopeRead)
	other := h.merchant("m_stats_other")
	viewer := h.session("m_stats", map[string]any{"capabilities": []string{"view"}})
	sub := decode[subscription](t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: hookBody("https://example.com/hook")}))
	id := uuid.MustParse(sub.ID)
	now := time.Now().UTC()
	// Two hours ago: a delivery failing once, then succeeding; an hour ago
	// one failing for good after two attempts; a test delivery now.
	twoAgo, oneAgo := now.Add(-2*time.Hour), now.Add(-time.Hour)
	recordDelivery(t, h.store, "m_stats", id, false, attemptAt{twoAgo, false}, attemptAt{twoAgo.Add(time.Second), true})
	recordDelivery(t, h.store, "m_stats", id, false, attemptAt{oneAgo, false}, attemptAt{oneAgo.Add(time.Second), false})
	recordDelivery(t, h.store, "m_stats", id, true, attemptAt{now, true})
	path := "/v1/webhook_subscriptions/" + sub.ID + "/stats"

	for _, c := range []struct {
		name, key, query string
		window           string
		buckets, step    int
	}{
		{"default window", key, "", "24h", 24, 3600},
		{"24h, read-only key", readOnly, "?window=24h", "24h", 24, 3600},
		{"7d, portal session", viewer.Token, "?window=7d", "7d", 28, 21600},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.do(request{Method: http.MethodGet, Path: path + c.query, Key: c.key})
			if r.Status != http.StatusOK {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			got := decode[endpointStats](t, r)
			if got.SubscriptionID != sub.ID || got.Window != c.window || got.BucketSeconds != c.step || len(got.Buckets) != c.buckets {
				t.Fatalf("window %s, %d buckets of %d s, want %s, %d of %d s", got.Window, len(got.Buckets), got.BucketSeconds,
					c.window, c.buckets, c.step)
			}
			step := time.Duration(c.step) * time.Second
			if !got.To.Equal(got.From.Add(time.Duration(c.buckets)*step)) || got.To.Before(now) || got.From.After(twoAgo) {
				t.Errorf("window [%v, %v) does not end with the running bucket", got.From, got.To)
			}
			want := make([]statsCounts, c.buckets)
			add := func(at time.Time, succeeded, retrying, failed int) {
				b := &want[int(at.Sub(got.From)/step)]
				b.Succeeded, b.Retrying, b.Failed = b.Succeeded+succeeded, b.Retrying+retrying, b.Failed+failed
				b.Attempts += succeeded + retrying + failed
			}
			add(twoAgo, 0, 1, 0)
			add(twoAgo.Add(time.Second), 1, 0, 0)
			add(oneAgo, 0, 1, 0)
			add(oneAgo.Add(time.Second), 0, 0, 1)
			for i, b := range got.Buckets {
				if !b.Start.Equal(got.From.Add(time.Duration(i) * step)) {
					t.Errorf("bucket %d starts %v", i, b.Start)
				}
				b.P50MS, b.P95MS = nil, nil // none got a response
				if b.statsCounts != want[i] {
					t.Errorf("bucket %d: %+v, want %+v", i, b.statsCounts, want[i])
				}
			}
			if tot := got.Totals; tot.Attempts != 4 || tot.Succeeded != 1 || tot.Retrying != 2 || tot.Failed != 1 ||
				tot.SuccessRate == nil || *tot.SuccessRate != 0.25 {
				t.Errorf("totals %+v (rate %v), want 4 attempts, 1 succeeded, 2 retrying, 1 failed, rate 0.25", tot.statsCounts, tot.SuccessRate)
			}
		})
	}

	for _, c := range []struct {
		name, key, path string
		status          int
		code            string
	}{
		{"another merchant's subscription", other, path, http.StatusNotFound, "resource_not_found"},
		{"no such subscription", key, "/v1/webhook_subscriptions/" + uuid.NewString() + "/stats", http.StatusNotFound, "resource_not_found"},
		{"malformed id", key, "/v1/webhook_subscriptions/nope/stats", http.StatusNotFound, "resource_not_found"},
		{"a window not offered", key, path + "?window=1h", http.StatusBadRequest, "parameter_invalid"},
		{"an empty window", key, path + "?window=", http.StatusBadRequest, "parameter_invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			expectError(t, h.do(request{Method: http.MethodGet, Path: c.path, Key: c.key}), c.status, c.code)
		})
	}
}
