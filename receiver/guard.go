package receiver

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Verdict is what [Guard.Check] advises for an event about a resource.
type Verdict int

const (
	// Apply: the event is news; act on it, then call [Guard.Record].
	Apply Verdict = iota + 1
	// Stale: an event of a later status was applied already; drop this
	// one (acknowledge it without acting).
	Stale
	// Fetch: the event contradicts a recorded failure (or a failure
	// arrives after a later state); neither can be trusted over the other.
	// Fetch the resource from the API, act on what it says, and Record
	// the fetched status.
	Fetch
)

// String names the verdict, for logs.
func (v Verdict) String() string {
	switch v {
	case Apply:
		return "apply"
	case Stale:
		return "stale"
	case Fetch:
		return "fetch"
	}
	return "unknown"
}

// DefaultRank returns the order of payout statuses: an event whose status
// ranks below the one recorded is stale.
func DefaultRank() []string { return []string{"initiated", "submitted", "sent", "returned"} }

// DefaultFailures returns the statuses outside the rank that end a
// resource.
func DefaultFailures() []string { return []string{"failed"} }

// DefaultKinds returns the resource kinds the guard orders: payouts and
// returns. Events about other kinds are always applied.
func DefaultKinds() []string { return []string{"payout", "return"} }

// StatusStore keeps the last status applied to each resource, by
// [Resource.Key].
type StatusStore interface {
	// LastStatus returns the status recorded for key, and false when none.
	LastStatus(ctx context.Context, key string) (status string, ok bool, err error)
	// SetStatus records status as the last one of key.
	SetStatus(ctx context.Context, key, status string) error
}

// GuardConfig configures a [Guard]. The zero value of each ranking field
// takes its default.
type GuardConfig struct {
	// Store keeps the last status of each resource; required.
	Store StatusStore
	// Rank lists the statuses in the order a resource moves through them;
	// nil means DefaultRank().
	Rank []string
	// Failures are the statuses outside the rank that end a resource; nil
	// means DefaultFailures().
	Failures []string
	// Kinds are the resource kinds the guard orders; nil means
	// DefaultKinds().
	Kinds []string
}

// validate checks the config without changing it.
func (c GuardConfig) validate() error {
	if c.Store == nil {
		return errors.New("receiver: GuardConfig.Store is required")
	}
	for _, f := range c.Failures {
		if slices.Contains(c.Rank, f) {
			return fmt.Errorf("receiver: status %q is both ranked and a failure", f)
		}
	}
	return nil
}

// Guard protects a merchant's copy of a resource from events that arrive
// out of order. Unless the subscription orders its deliveries by key
// (its "ordering" field), webhookd does not guarantee order: a payout's
// "sent" event may be retried and arrive after its "returned" event. And
// even then a manual redelivery goes outside the order. The guard compares
// each event's status with the last one recorded for the resource:
//
//   - nothing recorded, or a status that ranks at or above the recorded
//     one: Apply;
//   - a status that ranks below the recorded one: Stale;
//   - a ranked status after a recorded failure, or a failure after
//     the top-ranked status: Fetch, because one of them is wrong and only
//     the API knows which;
//   - a failure after any other ranked status: Apply (a payout can fail
//     from any state before it is sent);
//   - a status the guard does not rank, or a kind it does not order: Apply,
//     and Record keeps no trace of it.
//
// Check and Record are separate so that the status is recorded only once
// the handler has acted. Two events about one resource handled at the same
// instant can both pass Check; serialise a resource's events (a lock per
// Resource.Key) if the handler cannot tolerate that.
type Guard struct {
	store    StatusStore
	rank     map[string]int
	top      int
	failures []string
	kinds    []string
}

// NewGuard returns a Guard for cfg.
func NewGuard(cfg GuardConfig) (*Guard, error) {
	if cfg.Rank == nil {
		cfg.Rank = DefaultRank()
	}
	if cfg.Failures == nil {
		cfg.Failures = DefaultFailures()
	}
	if cfg.Kinds == nil {
		cfg.Kinds = DefaultKinds()
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Guard{store: cfg.Store, rank: make(map[string]int, len(cfg.Rank)), top: len(cfg.Rank),
		failures: slices.Clone(cfg.Failures), kinds: slices.Clone(cfg.Kinds)}
	for i, s := range cfg.Rank {
		g.rank[s] = i + 1
	}
	return g, nil
}

// Check returns the verdict for an event that says r is now in r.Status.
func (g *Guard) Check(ctx context.Context, r Resource) (Verdict, error) {
	if !g.tracks(r) {
		return Apply, nil
	}
	last, ok, err := g.store.LastStatus(ctx, r.Key())
	if err != nil {
		return 0, fmt.Errorf("last status of %s: %w", r.Key(), err)
	}
	if !ok {
		return Apply, nil
	}
	lastFailed, nowFailed := slices.Contains(g.failures, last), slices.Contains(g.failures, r.Status)
	lastRank, nowRank := g.rank[last], g.rank[r.Status]
	switch {
	case lastFailed && nowFailed:
		return Apply, nil // a repeat of the failure, perhaps with new detail
	case lastFailed:
		return Fetch, nil // a later state contradicts the failure
	case nowFailed && lastRank == g.top:
		return Fetch, nil // nothing should follow the last state
	case nowFailed:
		return Apply, nil
	case nowRank < lastRank:
		return Stale, nil
	}
	return Apply, nil
}

// Record stores r.Status as the resource's last status, after the handler
// applied the event (or, after a Fetch, the status read from the API).
// Statuses the guard does not rank are not stored.
func (g *Guard) Record(ctx context.Context, r Resource) error {
	if !g.tracks(r) {
		return nil
	}
	if err := g.store.SetStatus(ctx, r.Key(), r.Status); err != nil {
		return fmt.Errorf("record status %q of %s: %w", r.Status, r.Key(), err)
	}
	return nil
}

// tracks says whether the guard orders r: a kind it orders and a status it
// knows, ranked or failure.
func (g *Guard) tracks(r Resource) bool {
	if !slices.Contains(g.kinds, r.Kind) {
		return false
	}
	return g.rank[r.Status] > 0 || slices.Contains(g.failures, r.Status)
}
