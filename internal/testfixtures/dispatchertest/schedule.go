package dispatchertest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/delivertest"
)

// The schedule is the pipeline's Redis (queue.Lanes keeps nothing of its
// own): what a test arranges or reads in it through rc is what the
// dispatcher on the same Redis finds.

// ParkAttempt parks attempt number of del in the schedule on rc's Redis,
// due at due, as the worker that made the attempt before it does.
func ParkAttempt(ctx context.Context, rc redis.UniversalClient, del store.Delivery, number int, due time.Time) error {
	_, err := queue.NewLanes(rc, 0).Push(ctx, queue.LaneItem{ID: queue.AttemptTaskID(del.ID, number),
		Task: queue.ScheduledAttempt(del, number, due)})
	return err
}

// Parked tells whether attempt number of del waits in the schedule on
// rc's Redis.
func Parked(ctx context.Context, rc redis.UniversalClient, del store.Delivery, number int) (bool, error) {
	p, err := queue.NewLanes(rc, 0).Held(ctx, []queue.LaneItem{{ID: queue.AttemptTaskID(del.ID, number),
		Task: queue.ScheduledAttempt(del, number, time.Time{})}},
		time.Now().Add(time.Hour)) // parked: taken ones do not count
	if err != nil {
		return false, err
	}
	return p[0], nil
}

// takeAll is more attempts than any test parks.
const takeAll = 1 << 12

// TakeAndLose takes every due attempt from the schedule on rc's Redis at
// now and drops them, as a worker killed between taking attempts and
// leasing their deliveries does, and returns how many it took.
func TakeAndLose(ctx context.Context, rc redis.UniversalClient, now time.Time) (int, error) {
	got, err := queue.NewLanes(rc, 0).Take(ctx, queue.TakeRequest{Now: now, Want: takeAll, Share: takeAll, SubscriptionCap: takeAll,
		Held: time.Millisecond}, queue.Running{})
	return len(got.Items), err
}

// ScheduleParked is how many attempts wait in the schedule on rc's Redis.
func ScheduleParked(ctx context.Context, rc redis.UniversalClient) (int64, error) {
	s, err := queue.NewLanes(rc, 0).Stats(ctx, time.Now())
	return s.Parked, err
}

// HoldFilters configures the filters of merchantID's events to wait for
// release before they judge, as costly filters (many regexes over a large
// payload) take their time.
func HoldFilters(merchantID string, release <-chan struct{}) func(*dispatcher.Config) {
	return func(c *dispatcher.Config) {
		c.WrapFilterMatcher = func(match publish.Matcher) publish.Matcher {
			return func(ctx context.Context, ev store.Event, subs []store.FilteredSubscription) ([]uuid.UUID, error) {
				if ev.MerchantID == merchantID {
					<-release
				}
				return match(ctx, ev, subs)
			}
		}
	}
}

// DialThrough configures deliveries to resolve names with resolver (nil:
// the system's) on the dialer the Config would build, confined to
// loopback.
func DialThrough(t testing.TB, resolver *net.Resolver) func(*dispatcher.Config) {
	return func(c *dispatcher.Config) {
		dialer := c.NewDialer()
		dialer.Resolver = resolver
		c.Dialer = delivertest.Confine(t, dialer)
	}
}
