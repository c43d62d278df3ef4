package deliver

import (
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/store"
)

// keptLeases holds the first attempts that this process's publisher
// leased for its pool (store.EventWrite.LeaseUntil) and the pool refused
// (its merchant at its share, its subscription at its cap, a take under
// way), which therefore went to the schedule carrying their lease as a
// handover (queue.Attempt.Handover). When this process's scheduler takes
// one back while that lease is still young, the attempt runs on it as a
// local start does: no lease statement, no read of the event and the
// subscription, which the publish read already. Under a backlog of one
// merchant's fan-outs that is most of its first attempts.
//
// An attempt the scheduler takes too late (its lease older than the
// window), or that another process takes, leases its delivery as before,
// taking the handover over. So what an attempt kept here may miss is a
// change of its subscription made within the window after its publish:
// the scheduler empties the whole store when a change is announced
// (Empty), so only a change whose announcement is lost, or one committed
// in the milliseconds between the publish's read and the refusal, is
// missed, and for the window at most. A local start has the same
// exposure for the milliseconds it takes.
//
// Bounded: at most keptLeasesMax entries and keptLeasesBytes bytes of
// bodies and sealed columns (a body shared by a fan-out's deliveries
// counts once per delivery), the oldest dropped first; an entry past the
// window is dropped when the next one is kept.
type keptLeases struct {
	// window is how long after its publish a lease may still serve: the
	// attempt then has at least its full lease but window to run.
	window time.Duration

	mu      sync.Mutex
	entries map[uuid.UUID]keptLease
	// order is the ids in the order kept, from head; an id whose entry
	// was taken stays until it reaches the head.
	order []uuid.UUID
	head  int
	bytes int
}

// keptLease is one kept first attempt and when it was kept.
type keptLease struct {
	leased store.LeasedDelivery
	kept   time.Time
	size   int
}

// keptLeasesMax and keptLeasesBytes bound a process's kept leases: a
// backlog of 16,384 first attempts of 1 KiB events is 16 MiB and covers
// what the pool of a few hundred slots takes within a window.
const (
	keptLeasesMax   = 16_384
	keptLeasesBytes = 32 << 20
)

// keptLeaseOverhead is what an entry costs beside its byte slices.
const keptLeaseOverhead = 512

// newKeptLeases is an empty store serving leases window after their
// publish at most; a window of 0 keeps nothing.
func newKeptLeases(window time.Duration) *keptLeases {
	return &keptLeases{window: window, entries: map[uuid.UUID]keptLease{}}
}

// keep holds l, leased at publish for a first attempt that the pool
// refused at now.
func (k *keptLeases) keep(l store.LeasedDelivery, now time.Time) {
	if k.window <= 0 || l.AttemptCount != 0 {
		return
	}
	size := keptLeaseOverhead + len(l.Body) + len(l.SealedHeaders) + len(l.SealedAuthentication) + len(l.EncryptionKey) +
		len(l.SealedDestination)
	if size > keptLeasesBytes {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if old, ok := k.entries[l.ID]; ok {
		k.bytes -= old.size
	}
	k.entries[l.ID] = keptLease{leased: l, kept: now, size: size}
	k.order = append(k.order, l.ID)
	k.bytes += size
	k.dropOldLocked(now)
}

// dropOldLocked drops entries from the oldest until the store is within
// its bounds and its oldest entry within the window. Called with mu held.
func (k *keptLeases) dropOldLocked(now time.Time) {
	for k.head < len(k.order) {
		id := k.order[k.head]
		e, ok := k.entries[id]
		if ok && len(k.entries) <= keptLeasesMax && k.bytes <= keptLeasesBytes && now.Sub(e.kept) <= k.window {
			break
		}
		if ok {
			delete(k.entries, id)
			k.bytes -= e.size
		}
		k.order[k.head] = uuid.Nil
		k.head++
	}
	// The slice's dead front is given back once it is most of it.
	if k.head > 1024 && k.head > len(k.order)/2 {
		k.order = append([]uuid.UUID(nil), k.order[k.head:]...)
		k.head = 0
	}
}

// take returns the lease kept for the first attempt t, taken from the
// schedule at now, and forgets it: ok only when its lease is the one t
// hands over and was taken within the window.
func (k *keptLeases) take(t queue.Attempt, now time.Time) (store.LeasedDelivery, bool) {
	if k.window <= 0 || t.Handover.IsZero() || t.Number != 1 {
		return store.LeasedDelivery{}, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.entries[t.DeliveryID]
	if !ok {
		return store.LeasedDelivery{}, false
	}
	delete(k.entries, t.DeliveryID)
	k.bytes -= e.size
	if !e.leased.LeaseUntil.Equal(t.Handover) || now.Sub(e.kept) > k.window || now.Before(e.kept) {
		return store.LeasedDelivery{}, false
	}
	return e.leased, true
}

// empty forgets every kept lease: a subscription changed.
func (k *keptLeases) empty() {
	k.mu.Lock()
	defer k.mu.Unlock()
	clear(k.entries)
	k.order, k.head, k.bytes = nil, 0, 0
}

// len is how many leases are kept.
func (k *keptLeases) len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.entries)
}
