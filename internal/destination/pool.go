package destination

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Pool limits.
const (
	// maxPublishers bounds the publishers kept when the worker runs more
	// attempts at once than that; past it, the one used least recently is
	// closed.
	maxPublishers = 256
	// idlePublisher is how long a publisher is kept unused: a deleted
	// subscription's connection closes by then.
	idlePublisher = 5 * time.Minute
)

// PoolConfig is what a Pool needs.
type PoolConfig struct {
	// Registry reads stored destinations (required).
	Registry *Registry
	// Unseal opens a stored destination's sealed form (required).
	Unseal func(sealed []byte) ([]byte, error)
	// Env is what each publisher is given (required: Dial, Timeout, Clock).
	Env Env
	// AllowPlaintext lets a destination connect in clear
	// (WEBHOOKD_ALLOW_HTTP_TARGETS).
	AllowPlaintext bool
	// Max bounds the publishers kept; 0 is 256.
	Max int
}

// Pool keeps one publisher per subscription and destination version:
// opened the first time a subscription's destination is sent to, opened
// again (the old one closed) when the destination changed, closed when
// the subscription is deleted or disabled (Forget), idle too long, or
// used least recently past the bound.
type Pool struct {
	cfg PoolConfig

	mu   sync.Mutex
	kept map[uuid.UUID]*keptPublisher
}

type keptPublisher struct {
	version   string
	publisher Publisher
	used      time.Time
}

// NewPool returns a Pool of cfg.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if cfg.Registry == nil || cfg.Unseal == nil || cfg.Env.Dial == nil || cfg.Env.Timeout <= 0 || cfg.Env.Clock == nil {
		return nil, errors.New("destination pool: Registry, Unseal, Env.Dial, Env.Timeout and Env.Clock are required")
	}
	if cfg.Max <= 0 {
		cfg.Max = maxPublishers
	}
	return &Pool{cfg: cfg, kept: make(map[uuid.UUID]*keptPublisher)}, nil
}

// Open reads a stored destination again by this build's rules: a value
// that breaks one (an older build's) is a *Failure of code
// destination_invalid or destination_plaintext_refused, told in the
// rule's words, which name the field and never quote its value; it is
// never handed to a kind's client. Any other error is internal.
func (p *Pool) Open(sealed []byte) (string, Config, error) {
	plain, err := p.cfg.Unseal(sealed)
	if err != nil {
		return "", nil, fmt.Errorf("open destination: %w", err)
	}
	typ, cfg, err := p.cfg.Registry.Parse("destination", plain)
	if err != nil {
		return "", nil, Refused(err)
	}
	if bad := CheckPlaintext("destination", cfg, p.cfg.AllowPlaintext); bad != nil {
		return "", nil, Fail(CodePlaintext, bad.Message, bad)
	}
	return typ, cfg, nil
}

// Publisher is the publisher of the subscription's destination as
// sealed, opened the first time and again when the destination changed.
func (p *Pool) Publisher(subscriptionID uuid.UUID, sealed []byte) (Publisher, error) {
	now := p.cfg.Env.Clock.Now()
	sum := sha256.Sum256(sealed)
	version := hex.EncodeToString(sum[:16])
	p.mu.Lock()
	if k, ok := p.kept[subscriptionID]; ok && k.version == version {
		k.used = now
		p.mu.Unlock()
		return k.publisher, nil
	}
	p.mu.Unlock()

	typ, cfg, err := p.Open(sealed)
	if err != nil {
		return nil, err
	}
	pub, err := p.cfg.Registry.Open(typ, cfg, p.cfg.Env)
	if err != nil {
		return nil, err
	}
	var stale []Publisher
	p.mu.Lock()
	if k, ok := p.kept[subscriptionID]; ok {
		if k.version == version {
			// Another attempt opened it meanwhile: keep one.
			p.mu.Unlock()
			_ = pub.Close()
			return k.publisher, nil
		}
		stale = append(stale, k.publisher)
	}
	p.kept[subscriptionID] = &keptPublisher{version: version, publisher: pub, used: now}
	stale = append(stale, p.evictLocked(now)...)
	p.mu.Unlock()
	for _, s := range stale {
		_ = s.Close()
	}
	return pub, nil
}

// evictLocked takes out the publishers idle too long and, over the
// bound, the one used least recently, for the caller to close.
func (p *Pool) evictLocked(now time.Time) []Publisher {
	var out []Publisher
	for id, k := range p.kept {
		if now.Sub(k.used) > idlePublisher {
			out = append(out, k.publisher)
			delete(p.kept, id)
		}
	}
	for len(p.kept) > p.cfg.Max {
		var oldest uuid.UUID
		var at time.Time
		for id, k := range p.kept {
			if at.IsZero() || k.used.Before(at) {
				oldest, at = id, k.used
			}
		}
		out = append(out, p.kept[oldest].publisher)
		delete(p.kept, oldest)
	}
	return out
}

// Forget closes the publisher of a subscription that was deleted or
// disabled.
func (p *Pool) Forget(subscriptionID uuid.UUID) {
	p.mu.Lock()
	k, ok := p.kept[subscriptionID]
	delete(p.kept, subscriptionID)
	p.mu.Unlock()
	if ok {
		_ = k.publisher.Close()
	}
}

// Len is how many publishers are kept.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.kept)
}

// Close closes every publisher.
func (p *Pool) Close() {
	p.mu.Lock()
	kept := p.kept
	p.kept = make(map[uuid.UUID]*keptPublisher)
	p.mu.Unlock()
	for _, k := range kept {
		_ = k.publisher.Close()
	}
}
