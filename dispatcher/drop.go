package dispatcher

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
)

// dropWork ends the pending deliveries of a subscription that was deleted
// or disabled (store.AbandonSubscriptionDeliveries: failed, as each would
// end when its attempt came up) and removes its parked attempts from the
// schedule. It returns how many attempts were parked and how many
// deliveries it ended. An enabled subscription's work is left alone.
func dropWork(ctx context.Context, l *Lanes, st *store.Store, now time.Time, merchantID string, subscriptionID uuid.UUID) (int, int64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), EnqueueTimeout)
	defer cancel()
	ended, gone, err := st.AbandonSubscriptionDeliveries(ctx, subscriptionID, now)
	if err != nil || !gone {
		// Enabled again, or a listener: its parked attempts may still run.
		return 0, ended, err
	}
	parked, err := l.Drop(ctx, merchantID, subscriptionID)
	return parked, ended, err
}

// DropSubscription ends at once the waiting work of a subscription the
// merchant just deleted or disabled: its pending deliveries end failed and
// its parked attempts leave the schedule, instead of each coming up in
// turn. The API calls it after the change is committed; a failure is no
// loss (each attempt then finds the subscription gone when it comes up),
// so it is only reported.
func (d *Dispatcher) DropSubscription(ctx context.Context, merchantID string, subscriptionID uuid.UUID) error {
	parked, ended, err := dropWork(ctx, d.tasks.Lanes, d.cfg.Store, d.cfg.Clock.Now(), merchantID, subscriptionID)
	if parked > 0 || ended > 0 {
		d.cfg.Logger.InfoContext(ctx, "subscription deleted or disabled; its waiting work dropped", "subscription_id", subscriptionID,
			"parked", parked, "deliveries", ended)
	}
	return err
}
