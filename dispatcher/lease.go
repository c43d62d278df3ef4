package dispatcher

import (
	"context"

	"github.com/webhookd/webhookd/store"
)

// newLeaser batches the workers' leases: under load, one UPDATE takes the
// rows of every attempt that started meanwhile, each with the same
// guarantees as store.LeaseDelivery (one attempt number never runs twice at
// once; a stale task finds nothing).
func (d *Dispatcher) newLeaser() *batcher[store.LeaseRequest, store.LeasedDelivery] {
	return newBatcher(func(ctx context.Context, reqs []store.LeaseRequest) ([]store.LeasedDelivery, []error, error) {
		return d.store.LeaseDeliveries(ctx, reqs, d.cfg.Now(), d.cfg.DeliveryTimeout+d.leaseMargin())
	})
}
