package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
)

// statsReads is what the stats route reads of a subscription's attempts.
type statsReads interface {
	// SubscriptionStats reads the subscription's attempts in the buckets
	// of a window, and their totals.
	SubscriptionStats(ctx context.Context, subscriptionID uuid.UUID, w store.StatsWindow) ([]store.StatsBucket, store.StatsBucket, error)
}

// statsWindows are the windows GET /v1/webhook_subscriptions/{id}/stats
// takes: 24 hours by the hour, 7 days by 6 hours (28 buckets, as many as a
// chart of a phone's width shows apart). Buckets are aligned on UTC: the
// last one is the running hour (or quarter of the day).
var statsWindows = map[string]struct {
	step    time.Duration
	buckets int
}{
	"24h": {time.Hour, 24},
	"7d":  {6 * time.Hour, 28},
}

// statsJSON is an endpoint's attempts over a window.
type statsJSON struct {
	SubscriptionID uuid.UUID         `json:"subscription_id"`
	Window         string            `json:"window"`
	BucketSeconds  int               `json:"bucket_seconds"`
	From           time.Time         `json:"from"`
	To             time.Time         `json:"to"`
	Totals         statsTotalsJSON   `json:"totals"`
	Buckets        []statsBucketJSON `json:"buckets"`
}

// statsCountsJSON counts attempts by outcome, with their response times.
type statsCountsJSON struct {
	Attempts  int      `json:"attempts"`
	Succeeded int      `json:"succeeded"`
	Retrying  int      `json:"retrying"`
	Failed    int      `json:"failed"`
	P50MS     *float64 `json:"p50_ms"`
	P95MS     *float64 `json:"p95_ms"`
}

// statsBucketJSON is one bucket of a window.
type statsBucketJSON struct {
	Start time.Time `json:"start"`
	statsCountsJSON
}

// statsTotalsJSON is the whole window, with its success rate (null when
// nothing was attempted).
type statsTotalsJSON struct {
	statsCountsJSON
	SuccessRate *float64 `json:"success_rate"`
}

func statsCounts(b store.StatsBucket) statsCountsJSON {
	return statsCountsJSON{Attempts: b.Succeeded + b.Retrying + b.Failed, Succeeded: b.Succeeded, Retrying: b.Retrying,
		Failed: b.Failed, P50MS: b.P50MS, P95MS: b.P95MS}
}

// stats answers the endpoint's attempts over the window asked for (24h
// when none is), test deliveries left out.
func (h endpointHandlers) stats(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	name := r.URL.Query().Get("window")
	if !r.URL.Query().Has("window") {
		name = "24h"
	}
	win, ok := statsWindows[name]
	if !ok {
		return errInvalid("window", "window must be 24h or 7d.")
	}
	merchant := principalOf(r.Context()).Merchant.ID
	if _, err := h.subscriptions.GetSubscription(r.Context(), merchant, id); err != nil {
		return err
	}
	last := h.clock.Now().UTC().Truncate(win.step)
	sw := store.StatsWindow{From: windowStart(h.clock.Now(), win.step, win.buckets), Step: win.step, Buckets: win.buckets}
	buckets, totals, err := h.statistics.SubscriptionStats(r.Context(), id, sw)
	if err != nil {
		return err
	}
	out := statsJSON{SubscriptionID: id, Window: name, BucketSeconds: int(win.step / time.Second), From: sw.From,
		To: last.Add(win.step), Totals: statsTotalsJSON{statsCountsJSON: statsCounts(totals)},
		Buckets: make([]statsBucketJSON, 0, len(buckets))}
	if n := out.Totals.Attempts; n > 0 {
		rate := float64(totals.Succeeded) / float64(n)
		out.Totals.SuccessRate = &rate
	}
	for _, b := range buckets {
		out.Buckets = append(out.Buckets, statsBucketJSON{Start: b.Start.UTC(), statsCountsJSON: statsCounts(b)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// windowStart is the start of a window of buckets of step that ends with
// the bucket holding now (UTC).
func windowStart(now time.Time, step time.Duration, buckets int) time.Time {
	return now.UTC().Truncate(step).Add(-time.Duration(buckets-1) * step)
}
