package store_test

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
)

// Each operational event is claimed once per state change, once per
// interval, or once per episode; the clock frees an interval's claim.
func TestClaimOperational(t *testing.T) {
	clock := newTestClock(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	st, ctx := newSubStore(t, store.WithClock(clock.Now))
	sub := createSub(t, st, "m1", "*").ID
	h := st.EndpointHealth
	for _, step := range []struct {
		name      string
		advance   time.Duration
		kind, key string
		interval  time.Duration
		won       bool
	}{
		{"enabled never announced disabled", 0, store.ClaimState, "enabled", 0, false},
		{"disabled", 0, store.ClaimState, "disabled", 0, true},
		{"disabled again", 0, store.ClaimState, "disabled", 0, false},
		{"enabled", 0, store.ClaimState, "enabled", 0, true},
		{"enabled again, a day later", 24 * time.Hour, store.ClaimState, "enabled", 0, false},
		{"disabled once more", 0, store.ClaimState, "disabled", 0, true},
		{"first exhausted", 0, store.ClaimExhausted, "", time.Hour, true},
		{"exhausted within the hour", 59 * time.Minute, store.ClaimExhausted, "", time.Hour, false},
		{"exhausted an hour on", time.Minute, store.ClaimExhausted, "", time.Hour, true},
		{"token episode", 0, store.ClaimTokenFailing, "t1", 0, true},
		{"same episode", time.Hour, store.ClaimTokenFailing, "t1", 0, false},
		{"next episode", 0, store.ClaimTokenFailing, "t2", 0, true},
	} {
		clock.Advance(step.advance)
		won, err := h.ClaimOperational(ctx, sub, step.kind, step.key, step.interval)
		if err != nil || won != step.won {
			t.Errorf("%s: won %v, %v; want %v", step.name, won, err, step.won)
		}
	}
}

// A token failing episode begins at the first failure after the
// subscription's last success and lasts through the failures after it;
// a success (the record's last_success_at) ends it, and the next failure
// begins another.
func TestTokenFailingSince(t *testing.T) {
	base := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	clock := newTestClock(base)
	st, ctx := newSubStore(t, store.WithClock(clock.Now))
	sub := createSub(t, st, "m1", "*").ID
	succeeded := func(at time.Time) {
		if _, err := st.Pool().Exec(ctx, `UPDATE subscriptions SET last_success_at = $2 WHERE id = $1`, sub, at); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		name    string
		advance time.Duration
		success bool // a success just before this failure
		since   time.Duration
	}{
		{"first failure", 0, false, 0},
		{"failing on", 5 * time.Minute, false, 0},
		{"still failing", 6 * time.Minute, false, 0},
		{"a failure after a success", time.Minute, true, 12 * time.Minute},
		{"failing on again", 30 * time.Minute, false, 12 * time.Minute},
	} {
		clock.Advance(step.advance)
		if step.success {
			succeeded(clock.Now().Add(-time.Second))
		}
		since, tokenURL, err := st.EndpointHealth.TokenFailingSince(ctx, sub)
		if err != nil || !since.Equal(base.Add(step.since)) || tokenURL != "" {
			t.Errorf("%s: since %v, %q, %v; want %v", step.name, since, tokenURL, err, base.Add(step.since))
		}
	}
}
