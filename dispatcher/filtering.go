package dispatcher

import (
	"context"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/filter"
	"github.com/webhookd/webhookd/store"
)

// matchFilters evaluates the filters of the merchant's subscriptions that
// ev would reach (read with the merchant) and returns those it passes. A filter that cannot judge
// the event (a missing field, a type mismatch, its cost limit) or no
// longer compiles does not pass it: a filter never fails open.
func (p *Publisher) matchFilters(ctx context.Context, ev store.Event, subs []store.FilteredSubscription) ([]uuid.UUID, error) {
	decoded, err := filter.Decode(ev.Body)
	if err != nil {
		return nil, err
	}
	var matched []uuid.UUID
	for _, sub := range subs {
		prg, err := p.filters.Program(sub.ID, sub.Version, sub.Filter)
		if err != nil {
			p.logger.WarnContext(ctx, "subscription filter does not compile; event not delivered to it",
				"event_id", ev.ID, "subscription_id", sub.ID, "error", err)
			continue
		}
		ok, err := prg.Match(decoded)
		if err != nil {
			p.logger.InfoContext(ctx, "subscription filter failed on the event; not delivered to it",
				"event_id", ev.ID, "subscription_id", sub.ID, "error", err)
			continue
		}
		if ok {
			matched = append(matched, sub.ID)
		}
	}
	return matched, nil
}
