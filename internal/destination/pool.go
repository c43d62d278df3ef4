package destination

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
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
	// builtin are the publishers of the built-in kinds chosen by a
	// subscription's kind, opened once and shared by every subscription.
	builtin map[string]Publisher

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
	p := &Pool{cfg: cfg, kept: make(map[uuid.UUID]*keptPublisher), builtin: map[string]Publisher{}}
	for typ, k := range cfg.Registry.builtin {
		md := k.Metadata()
		if md.ChosenBy == "" {
			continue // opened per subscription, from its stored form
		}
		pub, err := k.Open(nil, cfg.Env)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("destination pool: open built-in kind %s: %w", typ, err)
		}
		p.builtin[md.ChosenBy] = pub
	}
	return p, nil
}

// For is the publisher a subscription's attempt is sent by: its stored
// destination's kind (opened and kept per subscription version, as
// Publisher), else the built-in kind its own kind chooses (the HTTP
// endpoint, the listener). The choice is made here and nowhere else.
//
// The publisher of a stored destination answers every send with a
// whole Result and no error: a failure is a Result of its code
// (Classify), bounded by Env.Timeout; so is a stored value this build
// refuses (destination_invalid, destination_plaintext_refused), which is
// never handed to a kind. An error is internal (the destination could
// not be unsealed): nothing was sent.
func (p *Pool) For(s Subject) (Publisher, error) {
	if s.Sealed == nil {
		if pub, ok := p.builtin[s.Kind]; ok {
			return pub, nil
		}
		return refused{fail: Fail(CodeInvalid, "this server delivers no subscription of this kind", nil), clock: p.cfg.Env.Clock}, nil
	}
	pub, err := p.Publisher(s.ID, s.Sealed)
	var f *Failure
	if errors.As(err, &f) {
		return refused{fail: err, clock: p.cfg.Env.Clock}, nil
	}
	return pub, err
}

// Batches tells whether the kind For chooses for s sends a batch of
// deliveries as one message (Metadata.Batches): the HTTP endpoint, and a
// stored destination of a kind that stores a batch as one object (s3),
// whose publisher it opens to know.
func (p *Pool) Batches(s Subject) bool {
	if s.Sealed != nil {
		pub, err := p.Publisher(s.ID, s.Sealed)
		a, ok := pub.(attempted)
		return err == nil && ok && a.batches
	}
	_, k, ok := p.cfg.Registry.chosenBy(s.Kind)
	return ok && k.Metadata().Batches
}

// attempted is a kind's publisher as the Pool keeps it: each send given
// the message's lowercase headers, bounded by the delivery timeout, and
// its failure made the attempt's Result (finished).
type attempted struct {
	Publisher
	env Env
	// batches is its kind's Metadata.Batches.
	batches bool
}

// Send implements Publisher; its error is always nil.
func (a attempted) Send(ctx context.Context, m Message) (Result, error) {
	m.lowerHeaders()
	started := a.env.Clock.Now()
	sctx, cancel := context.WithTimeout(ctx, a.env.Timeout)
	sent, err := a.Publisher.Send(sctx, m)
	cancel()
	return finished(sent, err, started, a.env.Clock), nil
}

// Unwrap is the kind's own publisher.
func (a attempted) Unwrap() Publisher { return a.Publisher }

// refused is the publisher of a destination that cannot be opened for a
// reason the merchant is told (fail): every send fails so, sending
// nothing.
type refused struct {
	fail  error
	clock clock.Clock
}

// Send implements Publisher.
func (r refused) Send(context.Context, Message) (Result, error) {
	return finished(Result{}, r.fail, r.clock.Now(), r.clock), nil
}

// Close implements Publisher.
func (refused) Close() error { return nil }

// finished is the attempt's Result of a send that began at started and
// ended with err: a success, or the failure's code (Classify) and
// outcome (a deadline is a timeout, anything else a network error),
// the code and its words as the recorded answer.
func finished(res Result, err error, started time.Time, clk clock.Clock) Result {
	res.Started, res.Finished = started, clk.Now()
	res.Duration = res.Finished.Sub(started)
	if err == nil {
		res.Outcome, res.Answer = OutcomeSuccess, Printable([]byte(cut(res.Answer, MaxAnswer)))
		return res
	}
	code, said := Classify(err)
	res.Outcome = OutcomeNetworkError
	if errors.Is(err, context.DeadlineExceeded) {
		res.Outcome = OutcomeTimeout
	}
	res.Code, res.Cause, res.Answer = &code, err, Printable([]byte(cut(code+": "+said, MaxAnswer)))
	return res
}

// MaxAnswer bounds what an attempt records of an answer (DESIGN.md: the
// first 1 KiB).
const MaxAnswer = 1024

// cut is s cut to at most n bytes.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Printable makes an answer storable as Postgres text: valid UTF-8 (a
// 1 KiB cut may split a character) without NUL bytes.
func Printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
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
	opened, err := p.cfg.Registry.Open(typ, cfg, p.cfg.Env)
	if err != nil {
		return nil, err
	}
	k, _ := p.cfg.Registry.Kind(typ)
	var pub Publisher = attempted{Publisher: opened, env: p.cfg.Env, batches: k != nil && k.Metadata().Batches}
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
	for _, pub := range p.builtin {
		_ = pub.Close()
	}
}
