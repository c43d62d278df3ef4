package deliver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/retry"
)

// TestNoAttemptStartsBeforeItsDueTime: asynq keeps a scheduled task's time
// in whole seconds and hands it over up to a second early; an attempt must
// still never start before the next_attempt_at its delivery recorded, on a
// plain schedule or pushed back by a receiver's Retry-After. Checked over
// every retry of deliveries on a short schedule, with the jitter fixed so
// that each due time is known from the attempt before it.
func TestNoAttemptStartsBeforeItsDueTime(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	cases := []struct {
		name    string
		respond func(int, http.ResponseWriter, *http.Request)
		// due is how long after an attempt ends the next one is due.
		due time.Duration
	}{
		{"on the schedule", dispatchertest.Answer(http.StatusInternalServerError), delay},
		{"pushed back by Retry-After", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}, 2 * delay}, // Retry-After 1 s, capped at twice the scheduled delay
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := dispatchertest.New(t)
			rcv := dispatchertest.NewReceiver(t, tc.respond)
			for range 3 {
				e.Subscribe("m1", rcv.URL, "*")
			}
			schedule := retry.Schedule{Delays: make([]time.Duration, 7)}
			for i := range schedule.Delays {
				schedule.Delays[i] = delay
			}
			d, _ := e.Dispatcher(func(c *dispatcher.Config) {
				c.Schedule = schedule
				c.Jitter = func() float64 { return 0 }
			})
			e.Run(d)
			ev := e.Publish(d, "m1", "payout.paid")
			for _, del := range e.Deliveries(ev.ID) {
				got := e.WaitSettled(del.ID, 30*time.Second)
				if got.Status != store.DeliveryFailed || len(got.Attempts) != schedule.Attempts() {
					t.Fatalf("delivery %s after %d attempts, want failed after %d", got.Status, len(got.Attempts), schedule.Attempts())
				}
				for i := 1; i < len(got.Attempts); i++ {
					prev, next := got.Attempts[i-1], got.Attempts[i]
					// The previous attempt ended no earlier than it started
					// plus its whole milliseconds; the next was due tc.due
					// after that end.
					due := prev.AttemptedAt.Add(time.Duration(prev.DurationMS)*time.Millisecond + tc.due)
					if next.AttemptedAt.Before(due) {
						t.Errorf("attempt %d started %v before its due time", next.Number, due.Sub(next.AttemptedAt))
					}
				}
			}
		})
	}
}
