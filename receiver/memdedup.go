package receiver

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"
)

// DefaultMaxEntries bounds a [MemoryDeduplicator] when
// [MemoryDeduplicatorConfig.MaxEntries] is zero.
const DefaultMaxEntries = 100_000

// MemoryDeduplicatorConfig configures a [MemoryDeduplicator].
type MemoryDeduplicatorConfig struct {
	// Lease is how long a claim holds an id; zero means DefaultLease.
	Lease time.Duration
	// Retention is how long a done id is remembered; zero means
	// DefaultRetention.
	Retention time.Duration
	// MaxEntries bounds the ids kept; zero means DefaultMaxEntries. When
	// full, the id whose entry was written longest ago is forgotten first,
	// so a duplicate of it would be handled again: size it above the
	// number of events the endpoint receives in Retention.
	MaxEntries int
	// Now is the clock; nil means time.Now. Tests pin it.
	Now func() time.Time
}

// validate checks the config without changing it.
func (c MemoryDeduplicatorConfig) validate() error {
	if c.Lease < 0 || c.Retention < 0 || c.MaxEntries < 0 {
		return fmt.Errorf("receiver: negative lease %s, retention %s or max entries %d", c.Lease, c.Retention, c.MaxEntries)
	}
	return nil
}

// MemoryDeduplicator is a [Deduplicator] in the process's memory, bounded
// in size. It suits one process; several replicas behind a load balancer
// need a shared store (redisdedup, pgdedup), or a duplicate reaching
// another replica is handled twice.
type MemoryDeduplicator struct {
	cfg MemoryDeduplicatorConfig

	mu sync.Mutex
	// entries maps an id to its element in order.
	entries map[string]*list.Element
	// order holds *memoryEntry from the least recently written to the most;
	// expiry and eviction both take from its front.
	order *list.List
}

// memoryEntry is one id's state.
type memoryEntry struct {
	id      string
	token   string // "" once done
	expires time.Time
}

// NewMemoryDeduplicator returns an empty MemoryDeduplicator.
func NewMemoryDeduplicator(cfg MemoryDeduplicatorConfig) (*MemoryDeduplicator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxEntries == 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &MemoryDeduplicator{cfg: cfg, entries: make(map[string]*list.Element), order: list.New()}, nil
}

// Claim implements [Deduplicator].
func (m *MemoryDeduplicator) Claim(_ context.Context, id string) (Claim, error) {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.entries[id]; ok {
		e := el.Value.(*memoryEntry)
		if now.Before(e.expires) {
			if e.token == "" {
				return Claim{ID: id, State: Done}, nil
			}
			return Claim{ID: id, State: InProgress}, nil
		}
		m.remove(el)
	}
	c := Claim{ID: id, Token: NewClaimToken(), State: Claimed}
	m.put(&memoryEntry{id: id, token: c.Token, expires: now.Add(m.cfg.Lease)}, now)
	return c, nil
}

// Complete implements [Deduplicator]. It marks the id done even if the
// claim ran out meanwhile: the handler did succeed.
func (m *MemoryDeduplicator) Complete(_ context.Context, c Claim) error {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.entries[c.ID]; ok {
		m.remove(el)
	}
	m.put(&memoryEntry{id: c.ID, expires: now.Add(m.cfg.Retention)}, now)
	return nil
}

// Release implements [Deduplicator].
func (m *MemoryDeduplicator) Release(_ context.Context, c Claim) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.entries[c.ID]; ok && el.Value.(*memoryEntry).token == c.Token && c.Token != "" {
		m.remove(el)
	}
	return nil
}

// Len returns the number of ids held, expired ones included until the next
// write drops them.
func (m *MemoryDeduplicator) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// put appends e as the most recent entry, after dropping expired entries
// from the front and, when full, the oldest one. Leases are shorter than
// the retention, so the front is not always the first to expire; an expired
// entry behind a live one waits for its turn or for Claim to meet it.
func (m *MemoryDeduplicator) put(e *memoryEntry, now time.Time) {
	for front := m.order.Front(); front != nil; front = m.order.Front() {
		if fe := front.Value.(*memoryEntry); now.Before(fe.expires) && len(m.entries) < m.cfg.MaxEntries {
			break
		}
		m.remove(front)
	}
	m.entries[e.id] = m.order.PushBack(e)
}

func (m *MemoryDeduplicator) remove(el *list.Element) {
	delete(m.entries, el.Value.(*memoryEntry).id)
	m.order.Remove(el)
}
