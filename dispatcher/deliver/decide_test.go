package deliver

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/retry"
)

// TestPushBack pins how a receiver's Retry-After moves the next attempt:
// later by that much, never earlier than scheduled, never beyond twice the
// scheduled delay.
func TestPushBack(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	next := now.Add(10 * time.Second)
	cases := []struct {
		retryAfter time.Duration
		want       time.Duration
	}{
		{0, 10 * time.Second},
		{5 * time.Second, 10 * time.Second},
		{15 * time.Second, 15 * time.Second},
		{time.Hour, 20 * time.Second},
	}
	for _, tc := range cases {
		if got := pushBack(now, next, tc.retryAfter).Sub(now); got != tc.want {
			t.Errorf("pushBack(Retry-After %v) = +%v, want +%v", tc.retryAfter, got, tc.want)
		}
	}
}

// TestDecide is the retry policy as a table: what each result of an
// attempt leaves the delivery in.
func TestDecide(t *testing.T) {
	schedule := retry.Schedule{Delays: []time.Duration{10 * time.Second, time.Minute}} // 3 attempts
	started := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	finished := started.Add(200 * time.Millisecond)
	planned := started.Add(time.Hour)
	status := func(code int) *int { return &code }
	code := func(c string) *string { return &c }
	ok := Result{Started: started, Finished: finished, HTTPStatus: status(200)}
	failed := Result{Started: started, Finished: finished, HTTPStatus: status(500), ErrCode: code(errHTTPStatus)}
	gone := Result{Started: started, Finished: finished, HTTPStatus: status(410), ErrCode: code(errHTTPStatus)}
	slowDown := failed
	slowDown.retryAfter = 15 * time.Second
	pending := store.Delivery{ID: uuid.New(), Status: store.DeliveryPending, NextAttemptAt: &planned}
	done := store.Delivery{ID: uuid.New(), Status: store.DeliverySucceeded}
	at := func(n int, trigger store.Trigger) queue.Attempt { return queue.Attempt{Number: n, Trigger: trigger} }
	cases := []struct {
		name    string
		del     store.Delivery
		at      queue.Attempt
		res     Result
		jitter  float64
		status  store.DeliveryStatus
		next    time.Duration // after finished; 0: none
		nextAt  *time.Time    // an exact time instead
		disable bool
	}{
		{"success", pending, at(1, store.TriggerScheduled), ok, 0, store.DeliverySucceeded, 0, nil, false},
		{"first failure waits the first delay", pending, at(1, store.TriggerScheduled), failed, 0, store.DeliveryPending, 10 * time.Second, nil, false},
		{"jitter moves the delay by up to 10 %", pending, at(1, store.TriggerScheduled), failed, 1, store.DeliveryPending, 11 * time.Second, nil, false},
		{"negative jitter shortens it", pending, at(2, store.TriggerScheduled), failed, -1, store.DeliveryPending, 54 * time.Second, nil, false},
		{"Retry-After pushes the next attempt back", pending, at(1, store.TriggerScheduled), slowDown, 0, store.DeliveryPending, 15 * time.Second, nil, false},
		{"the last attempt's failure ends it", pending, at(3, store.TriggerScheduled), failed, 0, store.DeliveryFailed, 0, nil, false},
		{"410 Gone ends it and disables", pending, at(1, store.TriggerScheduled), gone, 0, store.DeliveryFailed, 0, nil, true},
		{"a manual success", done, at(4, store.TriggerManual), ok, 0, store.DeliverySucceeded, 0, nil, false},
		{"a manual failure of a finished delivery fails it", done, at(4, store.TriggerManual), failed, 0, store.DeliveryFailed, 0, nil, false},
		{"a manual failure keeps a pending delivery's plan", pending, at(2, store.TriggerManual), failed, 0, store.DeliveryPending, 0, &planned, false},
		{"a manual failure using the last attempt fails it", pending, at(3, store.TriggerManual), failed, 0, store.DeliveryFailed, 0, nil, false},
		{"a manual 410 disables", pending, at(2, store.TriggerManual), gone, 0, store.DeliveryFailed, 0, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := decide(schedule, tc.jitter, tc.del, tc.at, tc.res)
			want := tc.nextAt
			if tc.next > 0 {
				w := finished.Add(tc.next)
				want = &w
			}
			switch {
			case rec.Status != tc.status:
				t.Errorf("status %s, want %s", rec.Status, tc.status)
			case (rec.NextAttemptAt == nil) != (want == nil) || (want != nil && !rec.NextAttemptAt.Equal(*want)):
				t.Errorf("next attempt at %v, want %v", rec.NextAttemptAt, want)
			case rec.DisableSubscription != tc.disable:
				t.Errorf("disable %v, want %v", rec.DisableSubscription, tc.disable)
			case rec.Attempt.Number != tc.at.Number || rec.Attempt.Trigger != tc.at.Trigger || !rec.Attempt.AttemptedAt.Equal(started):
				t.Errorf("attempt row %+v", rec.Attempt)
			}
		})
	}
}

// TestDecideFollowsTheDeliverysSchedule: a delivery that keeps a policy of
// its own is retried on that policy's schedule, jittered as the engine's,
// not on the engine's, and fails after len+1 attempts; one that keeps the
// engine's (an empty policy, or none) follows the engine's. The clock is
// the test's: each attempt fails at the time decide planned it for.
func TestDecideFollowsTheDeliverysSchedule(t *testing.T) {
	engine := retry.Schedule{Delays: []time.Duration{time.Hour, time.Hour, time.Hour, time.Hour}}
	status := 500
	code := errHTTPStatus
	for _, tc := range []struct {
		name   string
		policy *store.RetryPolicy
		want   []time.Duration
	}{
		{"its own schedule", &store.RetryPolicy{Schedule: []int64{1, 2}, TimeoutSeconds: 1}, []time.Duration{time.Second, 2 * time.Second}},
		{"no retry at all", &store.RetryPolicy{Schedule: []int64{}}, nil},
		{"a timeout alone keeps the engine's schedule", &store.RetryPolicy{TimeoutSeconds: 3}, engine.Delays},
		{"the engine's, pinned", &store.RetryPolicy{}, engine.Delays},
		{"none read", nil, engine.Delays},
	} {
		for _, jitter := range []float64{-1, 0, 1} {
			t.Run(fmt.Sprintf("%s, jitter %v", tc.name, jitter), func(t *testing.T) {
				now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
				del := store.Delivery{ID: uuid.New(), Status: store.DeliveryPending, NextAttemptAt: &now, RetryPolicy: tc.policy}
				attempts := 0
				for {
					attempts++
					res := Result{Started: now, Finished: now.Add(100 * time.Millisecond), HTTPStatus: &status, ErrCode: &code}
					rec := decide(engine, jitter, del, queue.Attempt{Number: attempts, Trigger: store.TriggerScheduled}, res)
					if rec.Status == store.DeliveryFailed {
						break
					}
					if rec.Status != store.DeliveryPending || rec.NextAttemptAt == nil || attempts > len(tc.want) {
						t.Fatalf("attempt %d left %s, next %v; want %d delays", attempts, rec.Status, rec.NextAttemptAt, len(tc.want))
					}
					if got, want := rec.NextAttemptAt.Sub(res.Finished), retry.Jittered(tc.want[attempts-1], jitter); got != want {
						t.Fatalf("after attempt %d the next waits %v, want %v", attempts, got, want)
					}
					now = *rec.NextAttemptAt
					del.NextAttemptAt = rec.NextAttemptAt
				}
				if attempts != len(tc.want)+1 {
					t.Fatalf("failed after %d attempts, want %d", attempts, len(tc.want)+1)
				}
			})
		}
	}
}

// TestAttemptTimeout: an attempt's timeout is its delivery's policy's,
// never longer than the engine's, and the engine's without one.
func TestAttemptTimeout(t *testing.T) {
	engine := 5 * time.Second
	for _, tc := range []struct {
		policy *store.RetryPolicy
		want   time.Duration
	}{
		{nil, engine},
		{&store.RetryPolicy{}, engine},
		{&store.RetryPolicy{TimeoutSeconds: 1}, time.Second},
		{&store.RetryPolicy{TimeoutSeconds: 25}, engine},
	} {
		leased := store.LeasedDelivery{Delivery: store.Delivery{RetryPolicy: tc.policy}}
		if got := attemptTimeout(engine, leased); got != tc.want {
			t.Errorf("attemptTimeout(%+v) = %v, want %v", tc.policy, got, tc.want)
		}
	}
}
