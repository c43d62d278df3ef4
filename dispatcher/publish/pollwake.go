package publish

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// wakePollers tells the long polls of the poll subscriptions the created
// events reached that their lines grew (queue.WakePollers). A failure is
// logged: the deliveries are stored, and a waiting read finds them when
// its wait ends, or the next read does.
func (p *Publisher) wakePollers(ctx context.Context, created []store.EventWritten) {
	var subs []uuid.UUID
	for _, w := range created {
		for _, d := range w.Deliveries {
			if d.PollPosition != nil && !slices.Contains(subs, d.SubscriptionID) {
				subs = append(subs, d.SubscriptionID)
			}
		}
	}
	if err := queue.WakePollers(ctx, p.tasks.Redis, subs); err != nil {
		p.logger.WarnContext(ctx, "wake long polls", "subscriptions", len(subs), "error", err)
	}
}

// refusePoll refuses a manual attempt (redeliver, recover) of a poll
// subscription's delivery: nothing is ever sent to it, so an attempt could
// only fail. Its merchant reads a delivery again with since instead.
func refusePoll(sub store.Subscription) error {
	if sub.Destination == nil || sub.Destination.Type() != store.DestinationPoll {
		return nil
	}
	return invalid.Value("subscription_id", "poll_not_sent",
		"The subscription is a poll subscription: its deliveries are read, never sent. Read one again with poll's since parameter.")
}
