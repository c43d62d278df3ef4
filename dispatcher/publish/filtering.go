package publish

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/filter"
	"github.com/webhookd/webhookd/internal/store"
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

// filterBudget is how long a group commit of publishes waits for the
// filters of its publishes, all together. A publish whose filters take
// longer (many regexes over a large payload) is judged outside the group
// and written with a later one: one merchant's costly filters then delay
// that merchant's publishes only, never the others' in its group.
const filterBudget = 20 * time.Millisecond

// filterVerdict is what a merchant's filters made of one event.
type filterVerdict struct {
	// event is the event judged, id and envelope included: written as it
	// is, it is the event the filters saw.
	event store.Event
	// against are the filters judged (each subscription's id and
	// version): a verdict on other filters is no verdict.
	against []store.FilteredSubscription
	matched []uuid.UUID
	err     error
}

// judgedOutside is writeGroup's answer to a publish whose filters took
// longer than filterBudget: the publish waits for verdict and is written
// again with it.
type judgedOutside struct {
	verdict <-chan filterVerdict
}

func (judgedOutside) Error() string { return "filters judged outside the group commit" }

// judge evaluates subs' filters on ev in a goroutine of its own and
// hands over the verdict.
func (p *Publisher) judge(ctx context.Context, ev store.Event, subs []store.FilteredSubscription) <-chan filterVerdict {
	out := make(chan filterVerdict, 1)
	go func() {
		matched, err := p.matcher(context.WithoutCancel(ctx), ev, subs)
		out <- filterVerdict{event: ev, against: subs, matched: matched, err: err}
	}()
	return out
}

// sameFilters tells whether two reads of a merchant's filters are the same
// filters: the same subscriptions at the same versions, in any order.
func sameFilters(a, b []store.FilteredSubscription) bool {
	if len(a) != len(b) {
		return false
	}
	for _, f := range a {
		if !slices.ContainsFunc(b, func(g store.FilteredSubscription) bool { return g.ID == f.ID && g.Version.Equal(f.Version) }) {
			return false
		}
	}
	return true
}
