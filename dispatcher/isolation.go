package dispatcher

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// subscriptionLimiter caps the attempts one subscription has running in
// this process. A receiver that hangs until the delivery timeout would
// otherwise take every worker once enough of its deliveries are due, and
// stall every other merchant's webhooks behind it. An attempt over the cap
// is put back on the queue for a moment (asynq retry without counting a
// failure), leaving the worker to other subscriptions.
//
// The cap is per process: with N worker processes a subscription holds at
// most N·cap workers in all. That bounds the damage without a Redis round
// trip per attempt; a shared cap in Redis would be the next step if one
// subscription's traffic ever needed a global bound.
type subscriptionLimiter struct {
	limit   int
	mu      sync.Mutex
	running map[uuid.UUID]int
	// freed holds, per subscription with attempts waiting for a slot, a
	// channel closed when one of its slots is given back.
	freed map[uuid.UUID]chan struct{}
	// fullSince is when each subscription at its cap reached it.
	fullSince map[uuid.UUID]time.Time
}

func newSubscriptionLimiter(limit int) *subscriptionLimiter {
	return &subscriptionLimiter{limit: limit, running: make(map[uuid.UUID]int), freed: make(map[uuid.UUID]chan struct{}),
		fullSince: make(map[uuid.UUID]time.Time)}
}

// acquireWithin is acquire, waiting up to wait for a slot. A fast receiver
// that a burst took to its cap frees a slot within milliseconds; putting
// its attempt back on the queue would cost it the queue's scheduling delay
// (about a second). A hanging receiver frees none, and its attempt goes
// back on the queue after wait, leaving the worker to others; once it has
// been at its cap for longer than wait, its attempts go back at once, so
// that they do not keep workers waiting in turn.
func (l *subscriptionLimiter) acquireWithin(ctx context.Context, id uuid.UUID, wait time.Duration) bool {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		if l.running[id] < l.limit {
			l.running[id]++
			if l.running[id] == l.limit {
				l.fullSince[id] = time.Now()
			}
			l.mu.Unlock()
			return true
		}
		if time.Since(l.fullSince[id]) > wait {
			l.mu.Unlock()
			return false
		}
		freed, ok := l.freed[id]
		if !ok {
			freed = make(chan struct{})
			l.freed[id] = freed
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

// acquire takes a slot for the subscription, or reports that it holds
// its share already.
func (l *subscriptionLimiter) acquire(id uuid.UUID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[id] >= l.limit {
		return false
	}
	l.running[id]++
	return true
}

// release gives a slot back.
func (l *subscriptionLimiter) release(id uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if freed, ok := l.freed[id]; ok {
		close(freed)
		delete(l.freed, id)
	}
	delete(l.fullSince, id)
	if l.running[id] <= 1 {
		delete(l.running, id)
		return
	}
	l.running[id]--
}

// fullFor is how long the subscription has been at its cap (0 if it is not).
func (l *subscriptionLimiter) fullFor(id uuid.UUID) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	since, ok := l.fullSince[id]
	if !ok || l.running[id] < l.limit {
		return 0
	}
	return time.Since(since)
}
