package queue

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Long polls of a poll subscription wait on its Redis channel; the fan-out
// publishes on it once per commit group that gave the subscription new
// deliveries. The message carries nothing: a waiting read is only told to
// read its line again in Postgres, which stays the one source of what is
// there. A message published while nobody listens is lost, which is what
// it should be: a reader that starts later reads Postgres first.

// PollChannel is the Redis channel a long poll of subscriptionID waits on.
// The braces keep a Redis Cluster's sharded channels of one subscription
// in one slot.
func PollChannel(subscriptionID uuid.UUID) string {
	return "webhookd:poll:{" + subscriptionID.String() + "}"
}

// WakePollers tells the long polls of each subscription that its line has
// new deliveries, in one pipelined round trip.
func WakePollers(ctx context.Context, rdb redis.UniversalClient, subscriptionIDs []uuid.UUID) error {
	if len(subscriptionIDs) == 0 {
		return nil
	}
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range subscriptionIDs {
			p.Publish(ctx, PollChannel(id), "1")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("wake pollers of %d subscriptions: %w", len(subscriptionIDs), err)
	}
	return nil
}
