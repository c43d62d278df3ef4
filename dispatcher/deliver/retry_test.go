package deliver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestRetryOutcomes drives one delivery against receivers with different
// behaviours and checks the attempts recorded.
func TestRetryOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		respond    func(n int, w http.ResponseWriter, r *http.Request)
		wantStatus store.DeliveryStatus
		wantErrors []string // per attempt; "" for success
		wantHTTP   []int
		wantBody   int // length of each attempt's response_body, when set
	}{
		{
			name: "always 500 uses every attempt",
			respond: func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusInternalServerError)
				w.Write([]byte(strings.Repeat("e", 5000)))
			},
			wantStatus: store.DeliveryFailed,
			wantErrors: []string{"http_status", "http_status", "http_status", "http_status"},
			wantHTTP:   []int{500, 500, 500, 500},
			wantBody:   1024,
		},
		{
			name: "500 then 200 succeeds on attempt 2",
			respond: func(n int, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusOK)
			},
			wantStatus: store.DeliverySucceeded,
			wantErrors: []string{"http_status", ""},
			wantHTTP:   []int{500, 200},
		},
		{
			name: "slow receiver times out",
			respond: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					select {
					case <-r.Context().Done():
					case <-time.After(3 * time.Second):
					}
					return
				}
				w.WriteHeader(http.StatusOK)
			},
			wantStatus: store.DeliverySucceeded,
			wantErrors: []string{"timeout", ""},
			wantHTTP:   []int{0, 200},
		},
		{
			name:       "410 gone ends the delivery",
			respond:    dispatchertest.Answer(http.StatusGone),
			wantStatus: store.DeliveryFailed,
			wantErrors: []string{"http_status"},
			wantHTTP:   []int{410},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := dispatchertest.New(t)
			rcv := dispatchertest.NewReceiver(t, tc.respond)
			sub, _ := e.Subscribe("m1", rcv.URL, "*")
			// The sweeper's grace is a second, so that a loaded machine's
			// slow enqueue of the next attempt is not taken for a lost one
			// (webhookd_sweeper_requeued_total must stay 0).
			d, reg := e.Dispatcher(func(c *dispatcher.Config) { c.SweepGrace = time.Second })
			e.Run(d)
			ev := e.Publish(d, "m1", "payout.paid")
			del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 10*time.Second)
			defer func() {
				attempts := float64(len(tc.wantErrors))
				failed := 0.0
				if tc.wantStatus == store.DeliveryFailed {
					failed = 1
				}
				for name, want := range map[string]float64{
					"webhookd_delivery_attempts_total": attempts,
					"webhookd_retries_scheduled_total": attempts - 1,
					"webhookd_deliveries_failed_total": failed,
					"webhookd_sweeper_requeued_total":  0,
				} {
					if got := dispatchertest.Counter(t, reg, name); got != want {
						t.Errorf("%s = %v, want %v", name, got, want)
					}
				}
				// The event published; a 410's disable publishes an
				// operational event of its own type besides.
				if got := dispatchertest.CounterWith(t, reg, "webhookd_events_ingested_total", "type", "payout.paid"); got != 1 {
					t.Errorf("webhookd_events_ingested_total{type=payout.paid} = %v, want 1", got)
				}
			}()
			if del.Status != tc.wantStatus || len(del.Attempts) != len(tc.wantErrors) || del.AttemptCount != len(tc.wantErrors) {
				t.Fatalf("status %s after %d attempts (count %d), want %s after %d", del.Status, len(del.Attempts),
					del.AttemptCount, tc.wantStatus, len(tc.wantErrors))
			}
			for i, a := range del.Attempts {
				gotErr, gotHTTP := "", 0
				if a.Error != nil {
					gotErr = *a.Error
				}
				if a.HTTPStatus != nil {
					gotHTTP = *a.HTTPStatus
				}
				if a.Number != i+1 || gotErr != tc.wantErrors[i] || gotHTTP != tc.wantHTTP[i] || a.Trigger != store.TriggerScheduled {
					t.Errorf("attempt %d: number %d error %q http %d trigger %s; want error %q http %d",
						i+1, a.Number, gotErr, gotHTTP, a.Trigger, tc.wantErrors[i], tc.wantHTTP[i])
				}
				if tc.wantBody != 0 && len(a.ResponseBody) != tc.wantBody {
					t.Errorf("attempt %d kept %d bytes of the answer, want %d", i+1, len(a.ResponseBody), tc.wantBody)
				}
				if (a.Status == store.AttemptSucceeded) != (gotErr == "") {
					t.Errorf("attempt %d status %s with error %q", i+1, a.Status, gotErr)
				}
			}
			if del.NextAttemptAt != nil {
				t.Errorf("settled delivery still has next_attempt_at %v", del.NextAttemptAt)
			}
			e.WaitIdle() // no task left to make a stray extra attempt
			if n := len(rcv.Got()); n != len(tc.wantErrors) {
				t.Errorf("receiver got %d requests, want %d", n, len(tc.wantErrors))
			}
			s, err := e.Store.Subscriptions.GetSubscription(context.Background(), "m1", sub.ID)
			if err != nil {
				t.Fatal(err)
			}
			switch tc.wantStatus {
			case store.DeliverySucceeded:
				if s.Health.ConsecutiveFailures != 0 || s.Health.LastSuccessAt == nil || s.Health.LastFailureAt == nil {
					t.Errorf("health after a retried success: %+v", s.Health)
				}
			case store.DeliveryFailed:
				if s.Health.ConsecutiveFailures != len(tc.wantErrors) || s.Health.LastFailureAt == nil {
					t.Errorf("health after %d failures: %+v", len(tc.wantErrors), s.Health)
				}
			}
			if wantDisabled := tc.wantHTTP[0] == http.StatusGone; (s.Status == store.SubscriptionDisabled) != wantDisabled {
				t.Errorf("subscription status %s after the receiver answered %d", s.Status, tc.wantHTTP[0])
			}
		})
	}
}
