package deliver

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
)

// dropWork ends, at d's clock's now, the pending deliveries of a
// subscription that was deleted or disabled
// (store.AbandonSubscriptionDeliveries: failed, as each would end when its
// attempt came up) and removes its parked attempts from the schedule. It returns how many attempts were parked and how many
// deliveries it ended. An enabled subscription's work is left alone.
func (d *Dropper) dropWork(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (int, int64, error) {
	now := d.clock.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queue.EnqueueTimeout)
	defer cancel()
	ended, gone, err := d.store.AbandonSubscriptionDeliveries(ctx, subscriptionID, now)
	if err != nil || !gone {
		// Enabled again, or a listener: its parked attempts may still run.
		return 0, ended, err
	}
	parked, err := d.lanes.Drop(ctx, merchantID, subscriptionID)
	return parked, ended, err
}

// dropperStore is what the Dropper needs of the database.
type dropperStore interface {
	// AbandonSubscriptionDeliveries ends the pending deliveries of a
	// deleted or disabled subscription; gone is false when it is neither.
	AbandonSubscriptionDeliveries(ctx context.Context, subscriptionID uuid.UUID, now time.Time) (ended int64, gone bool, err error)
}

// Dropper ends the waiting work of subscriptions the merchant deleted or
// disabled. The API role holds one: it needs the schedule and the store,
// not a worker.
type Dropper struct {
	lanes  *queue.Lanes
	store  dropperStore
	clock  clock.Clock
	logger *slog.Logger
}

// NewDropper returns the Dropper of the schedule l and the store st.
func NewDropper(l *queue.Lanes, st dropperStore, c clock.Clock, logger *slog.Logger) *Dropper {
	return &Dropper{lanes: l, store: st, clock: clock.Or(c), logger: logger}
}

// DropSubscription ends at once the waiting work of a subscription the
// merchant just deleted or disabled: its pending deliveries end failed and
// its parked attempts leave the schedule, instead of each coming up in
// turn. The API calls it after the change is committed; a failure is no
// loss (each attempt then finds the subscription gone when it comes up),
// so it is only reported.
func (d *Dropper) DropSubscription(ctx context.Context, merchantID string, subscriptionID uuid.UUID) error {
	parked, ended, err := d.dropWork(ctx, merchantID, subscriptionID)
	if parked > 0 || ended > 0 {
		d.logger.InfoContext(ctx, "subscription deleted or disabled; its waiting work dropped", "subscription_id", subscriptionID,
			"parked", parked, "deliveries", ended)
	}
	return err
}
