package dispatcher

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// rateLimitPrefix names the Redis keys of the subscriptions' rate limits.
const rateLimitPrefix = "webhookd:rate:subscription:"

// deliveryRates holds each rate-limited subscription to its deliveries per
// second across every worker process: a GCRA in Redis with a burst of one,
// so that no second ever sees more than the limit. An attempt over the
// limit is told how long to wait; it goes back on the queue for that long
// instead of holding a worker, and counts as no attempt.
type deliveryRates struct {
	limiter *redis_rate.Limiter
}

func newDeliveryRates(rdb redis.UniversalClient) *deliveryRates {
	return &deliveryRates{limiter: redis_rate.NewLimiter(rdb)}
}

// await is take, waiting in the worker while the subscription's next turn
// is within patience: a turn that near costs less waited for than put back
// on the queue. The caller holds the subscription's concurrency slot, which
// bounds how many workers one endpoint can keep waiting. It returns how
// long to wait still (0: go now), the turn put back on the queue for,
// spread so that the attempts waiting for one endpoint do not all come back
// at the same instant.
func (r *deliveryRates) await(ctx context.Context, subscriptionID uuid.UUID, perSecond int, patience time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(patience)
	for {
		wait, err := r.take(ctx, subscriptionID, perSecond)
		if err != nil || wait == 0 {
			return 0, err
		}
		if time.Now().Add(wait).After(deadline) {
			return wait + rand.N(wait), nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return 0, ctx.Err()
		}
	}
}

// take spends one delivery of the subscription's second when perSecond is
// positive. It returns how long to wait first (0: go now).
func (r *deliveryRates) take(ctx context.Context, subscriptionID uuid.UUID, perSecond int) (time.Duration, error) {
	if perSecond <= 0 {
		return 0, nil
	}
	res, err := r.limiter.Allow(ctx, rateLimitPrefix+subscriptionID.String(),
		redis_rate.Limit{Rate: perSecond, Burst: 1, Period: time.Second})
	if err != nil {
		return 0, fmt.Errorf("rate limit of subscription %s: %w", subscriptionID, err)
	}
	if res.Allowed > 0 {
		return 0, nil
	}
	// Never zero: a zero retry would be due at once and spin.
	return max(res.RetryAfter, time.Millisecond), nil
}
