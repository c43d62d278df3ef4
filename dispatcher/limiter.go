package dispatcher

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// attemptSlots is every bound an attempt must fit in before it runs, so
// that no merchant, and no receiver, can take the workers from the others:
//
//   - the pool: at most Concurrency attempts run in this process, whether
//     they came as attempt tasks or inside one event's first-attempts task
//     (an event's fan-out shares the pool's limit);
//   - the merchant's share: at most MerchantShare of the pool runs one
//     merchant's attempts, however many subscriptions the merchant has;
//   - the subscription's cap: within its merchant's share, one receiver
//     that hangs until the timeout holds at most SubscriptionConcurrency
//     attempts, leaving the rest of the share to the merchant's other
//     endpoints.
//
// The merchant's and the subscription's slots are held until the HTTP
// exchange ends; the pool's until the outcome is recorded.
//
// An attempt over its merchant's or subscription's cap is put back on the
// queue (asynq retry without counting a failure) for about as long as the
// cap has been reached, leaving the worker to other merchants: that is what
// makes the queue fair between merchants without a queue per merchant.
//
// The bounds are per process: with N worker processes a merchant holds at
// most N·share workers in all, without a Redis round trip per attempt.
type attemptSlots struct {
	pool          *semaphore.Weighted
	merchants     *keyedLimiter
	subscriptions *keyedLimiter
	// maxBackOff bounds how long an attempt over a cap is put back for
	// (the delivery timeout: by then a hanging receiver's slot is free).
	maxBackOff time.Duration
}

func newAttemptSlots(pool, merchant, subscription int, maxBackOff time.Duration, clock Clock) *attemptSlots {
	return &attemptSlots{pool: semaphore.NewWeighted(int64(pool)), merchants: newKeyedLimiter(merchant, clock),
		subscriptions: newKeyedLimiter(subscription, clock), maxBackOff: maxBackOff}
}

// heldSlots are the slots one attempt holds.
type heldSlots struct {
	share sync.Once
	pool  sync.Once
	// releaseShare gives back the merchant's and the subscription's slots.
	releaseShare func()
	// releasePool gives back the pool's slot.
	releasePool func()
}

// endSend gives back the merchant's and the subscription's slots once the
// HTTP exchange is over: the caps bound what hangs on receivers, while
// recording the outcome only waits on Postgres, whose group commit wants as
// many attempts at once as the pool allows.
func (h *heldSlots) endSend() { h.share.Do(h.releaseShare) }

// release gives back every slot still held.
func (h *heldSlots) release() {
	h.endSend()
	h.pool.Do(h.releasePool)
}

// take reserves the slots of one attempt, waiting for the pool as long as
// ctx allows and for the merchant's and the subscription's caps up to wait.
// ok false: a cap is full; the attempt should go back on the queue for
// backOff.
func (s *attemptSlots) take(ctx context.Context, at attemptTask, wait time.Duration) (held *heldSlots, backOff time.Duration, ok bool, err error) {
	if err := s.pool.Acquire(ctx, 1); err != nil {
		return nil, 0, false, fmt.Errorf("wait for a worker slot: %w", err)
	}
	merchant, subscription := at.MerchantID, at.SubscriptionID.String()
	if merchant == "" {
		// A task from an older build: its subscription stands for its
		// merchant.
		merchant = "subscription:" + subscription
	}
	if !s.merchants.acquireWithin(ctx, merchant, wait) {
		s.pool.Release(1)
		return nil, s.backOff(s.merchants.fullFor(merchant)), false, nil
	}
	if !s.subscriptions.acquireWithin(ctx, subscription, wait) {
		s.merchants.release(merchant)
		s.pool.Release(1)
		return nil, s.backOff(s.subscriptions.fullFor(subscription)), false, nil
	}
	return &heldSlots{
		releaseShare: func() {
			s.subscriptions.release(subscription)
			s.merchants.release(merchant)
		},
		releasePool: func() { s.pool.Release(1) },
	}, 0, true, nil
}

// backOff is how long an attempt over a cap reached full ago goes back on
// the queue: about as long as the cap has been full. A fast receiver that
// a burst filled frees slots within moments, while one that hangs until the
// timeout frees none for a long while, and its waiting attempts must not
// come back every second to queue ahead of other merchants' webhooks. The
// returns are spread, so that a backlog does not come back in one burst.
func (s *attemptSlots) backOff(full time.Duration) time.Duration {
	wait := min(max(full, 100*time.Millisecond), s.maxBackOff)
	return time.Duration(float64(wait) * (0.5 + rand.Float64()))
}

// keyedLimiter caps the attempts one key (a merchant, a subscription) has
// running in this process.
type keyedLimiter struct {
	limit   int
	clock   Clock
	mu      sync.Mutex
	running map[string]int
	// freed holds, per key with attempts waiting for a slot, a channel
	// closed when one of its slots is given back.
	freed map[string]chan struct{}
	// fullSince is when each key at its cap reached it.
	fullSince map[string]time.Time
}

func newKeyedLimiter(limit int, clock Clock) *keyedLimiter {
	return &keyedLimiter{limit: limit, clock: clock, running: make(map[string]int), freed: make(map[string]chan struct{}),
		fullSince: make(map[string]time.Time)}
}

// acquireWithin takes a slot for the key, waiting up to wait for one. A
// fast receiver that a burst took to its cap frees a slot within
// milliseconds; putting its attempt back on the queue would cost it the
// queue's scheduling delay. A hanging receiver frees none, and its attempt
// goes back on the queue after wait, leaving the worker to others; once the
// key has been at its cap for longer than wait, its attempts go back at
// once, so that they do not keep workers waiting in turn.
func (l *keyedLimiter) acquireWithin(ctx context.Context, key string, wait time.Duration) bool {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		if l.running[key] < l.limit {
			l.running[key]++
			if l.running[key] == l.limit {
				l.fullSince[key] = l.clock.Now()
			}
			l.mu.Unlock()
			return true
		}
		if l.clock.Now().Sub(l.fullSince[key]) > wait {
			l.mu.Unlock()
			return false
		}
		freed, ok := l.freed[key]
		if !ok {
			freed = make(chan struct{})
			l.freed[key] = freed
		}
		l.mu.Unlock()
		select {
		case <-freed:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// release gives a slot back.
func (l *keyedLimiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if freed, ok := l.freed[key]; ok {
		close(freed)
		delete(l.freed, key)
	}
	delete(l.fullSince, key)
	if l.running[key] <= 1 {
		delete(l.running, key)
		return
	}
	l.running[key]--
}

// fullFor is how long the key has been at its cap (0 if it is not).
func (l *keyedLimiter) fullFor(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	since, ok := l.fullSince[key]
	if !ok || l.running[key] < l.limit {
		return 0
	}
	return l.clock.Now().Sub(since)
}
