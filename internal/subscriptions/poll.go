package subscriptions

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// pollTarget is what the url column holds for a poll subscription: it has
// no address, and lists and the portal show this in its place.
const pollTarget = "poll"

// pollSummary is a poll destination's public summary: it has no field but
// its type.
func pollSummary() map[string]any { return map[string]any{"type": DestinationPoll} }

// checkPollUnchanged refuses an update that makes a poll subscription a
// delivered one or the reverse: a poll subscription's deliveries wait to
// be read with no due time, a delivered one's wait for attempts, and
// neither kind would ever leave the other's state. A new subscription
// takes the other kind.
func (g *Registry) checkPollUnchanged(ctx context.Context, merchantID string, id uuid.UUID, u store.SubscriptionUpdate) error {
	if !u.SetDestination {
		return nil
	}
	cur, err := g.store.GetSubscription(ctx, merchantID, id)
	if err != nil {
		return err
	}
	wasPoll, isPoll := cur.Destination.Type() == DestinationPoll, u.Destination.Type() == DestinationPoll
	if wasPoll == isPoll {
		return nil
	}
	return invalid.Value("destination.type", "destination_poll_immutable", fmt.Sprintf(
		"A subscription is made a poll subscription when it is created, and stays one (this one %s); create a new subscription instead.",
		map[bool]string{true: "is a poll subscription", false: "is delivered to"}[wasPoll]))
}
