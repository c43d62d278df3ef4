package deliver

import (
	"context"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/groupcommit"
	"github.com/webhookd/webhookd/internal/store"
)

// leaser takes deliveries for attempts in batches: under load, one UPDATE
// takes the rows of every attempt that started meanwhile, each with the
// same guarantees as store.LeaseDelivery (one attempt number never runs
// twice at once; a stale task finds nothing).
type leaser struct {
	b *groupcommit.Batcher[store.LeaseRequest, store.LeasedDelivery]
}

// leaserStore is what the leaser needs of the database.
type leaserStore interface {
	// LeaseDeliveries takes the rows of many attempts in one statement,
	// one LeasedDelivery and one error per request.
	LeaseDeliveries(ctx context.Context, reqs []store.LeaseRequest, now time.Time, leaseFor time.Duration) ([]store.LeasedDelivery, []error, error)
}

// newLeaser starts the writer; each lease lasts leaseFor from the clock's
// now.
func newLeaser(st leaserStore, clock clock.Clock, leaseFor time.Duration) *leaser {
	return &leaser{b: groupcommit.New(func(ctx context.Context, reqs []store.LeaseRequest) ([]store.LeasedDelivery, []error, error) {
		return st.LeaseDeliveries(ctx, reqs, clock.Now(), leaseFor)
	})}
}

// lease takes the delivery for one attempt; store.ErrNotFound when that
// attempt is stale or running elsewhere.
func (l *leaser) lease(ctx context.Context, req store.LeaseRequest) (store.LeasedDelivery, error) {
	return l.b.Do(ctx, req)
}

func (l *leaser) close() { l.b.Close() }

// LeaseFor is how long a worker holds a delivery for one attempt of
// timeout: the delivery timeout and a margin to load secrets before and to
// record the attempt after the HTTP exchange. The margin is also how long
// a crashed worker delays the delivery.
func LeaseFor(timeout time.Duration) time.Duration {
	return timeout + min(max(timeout/2, time.Second), 10*time.Second)
}

// HandoverWindow is how long after its publish a first attempt the pool
// refused may still run on the publish's lease (SchedulerConfig.HandoverWindow)
// for a delivery timeout of timeout: half the lease's margin beyond the
// timeout (5 s of 10 at the default 25 s), so that the attempt still has
// its whole timeout and half the margin to be recorded in.
func HandoverWindow(timeout time.Duration) time.Duration {
	return (LeaseFor(timeout) - timeout) / 2
}
