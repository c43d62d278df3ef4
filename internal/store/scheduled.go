package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// ErrEventNotScheduled is a cancel of an event published for delivery at
// once: there is nothing scheduled to cancel.
var ErrEventNotScheduled = fmt.Errorf("event was not published with deliver_at: %w", ErrConflict)

// ErrEventStarted is a cancel of a scheduled event none of whose
// deliveries is still waiting: they started (or ended) already.
var ErrEventStarted = fmt.Errorf("event's deliveries already started: %w", ErrConflict)

// CancelledDelivery names a delivery CancelScheduled ended, so that its
// parked first attempt can leave the schedule.
type CancelledDelivery struct {
	ID             uuid.UUID
	MerchantID     string
	SubscriptionID uuid.UUID
}

// cancelScheduledSQL ends as cancelled every delivery of event $1 (created
// at $2) that is still scheduled (isScheduled) and not leased at $3, and
// counts the event's deliveries that started: neither cancelled (now or
// before) nor skipped. Its outer SELECT sees the rows as they were before
// the update, hence the NOT IN c.
const cancelScheduledSQL = `
		WITH c AS (
			UPDATE deliveries SET status = '` + string(DeliveryCancelled) + `', next_attempt_at = NULL, updated_at = $3
			WHERE event_id = $1 AND created_at = $2 AND ` + isScheduled + `
			  AND (lease_until IS NULL OR lease_until < $3)
			RETURNING id, merchant_id, subscription_id
		)
		SELECT coalesce((SELECT array_agg(id) FROM c), '{}'), coalesce((SELECT array_agg(merchant_id) FROM c), '{}'),
			coalesce((SELECT array_agg(subscription_id) FROM c), '{}'),
			(SELECT count(*) FROM deliveries d WHERE d.event_id = $1 AND d.created_at = $2
			   AND d.status NOT IN ('` + string(DeliveryCancelled) + `', '` + string(DeliverySkipped) + `')
			   AND d.id NOT IN (SELECT id FROM c))`

// CancelScheduled cancels the deliveries of a scheduled event that have
// not started: each still scheduled and not leased ends cancelled, never
// attempted (a lease refuses it, its parked task included). merchantID ""
// reaches any merchant's event (the core API's route); another merchant's
// event is ErrNotFound. It is idempotent: a cancel of an event whose
// deliveries are all cancelled already cancels nothing and succeeds. An
// event published without deliver_at is ErrEventNotScheduled; one with
// deliveries that started and none left to cancel is ErrEventStarted.
// When some started and others had not, those are cancelled and the
// others go on.
func (s *Events) CancelScheduled(ctx context.Context, merchantID string, id uuid.UUID) (Event, []CancelledDelivery, error) {
	ev, err := s.EventByID(ctx, id)
	if err != nil {
		return Event{}, nil, fmt.Errorf("cancel event %s: %w", id, err)
	}
	if merchantID != "" && ev.MerchantID != merchantID {
		return Event{}, nil, fmt.Errorf("cancel event %s: %w", id, ErrNotFound)
	}
	if ev.DeliverAt == nil {
		return ev, nil, fmt.Errorf("cancel event %s: %w", id, ErrEventNotScheduled)
	}
	var ids, subs []uuid.UUID
	var merchants []string
	var started int
	err = s.pool.QueryRow(ctx, cancelScheduledSQL, ev.ID, ev.CreatedAt, s.Now()).Scan(&ids, &merchants, &subs, &started)
	if err != nil {
		return Event{}, nil, fmt.Errorf("cancel event %s: %w", id, err)
	}
	if len(ids) == 0 && started > 0 {
		return ev, nil, fmt.Errorf("cancel event %s: %w", id, ErrEventStarted)
	}
	out := make([]CancelledDelivery, len(ids))
	for i := range ids {
		out[i] = CancelledDelivery{ID: ids[i], MerchantID: merchants[i], SubscriptionID: subs[i]}
	}
	return ev, out, nil
}
