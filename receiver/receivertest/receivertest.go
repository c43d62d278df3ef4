// Package receivertest checks that an implementation of
// [receiver.Deduplicator] or [receiver.StatusStore] keeps its contract. The
// implementations in receiver, receiver/redisdedup and receiver/pgdedup all
// pass; a merchant writing one for another store can run the same checks.
package receivertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/receiver"
)

// Deduplicator is the Deduplicator implementation under test.
type Deduplicator struct {
	// New returns an empty Deduplicator whose claims last lease and whose
	// done ids last retention.
	New func(t *testing.T, lease, retention time.Duration) receiver.Deduplicator
	// Advance moves the Deduplicator's clock forward by d: an injected
	// clock's, or real time for a store that expires keys itself.
	Advance func(t *testing.T, d time.Duration)
	// Lease and Retention are passed to New; Retention must exceed Lease.
	// A store on real time needs them long enough for a few round trips.
	Lease, Retention time.Duration
}

// RunDeduplicator checks the contract of [receiver.Deduplicator] on s.
func RunDeduplicator(t *testing.T, s Deduplicator) {
	t.Helper()
	ctx := context.Background()
	claim := func(t *testing.T, d receiver.Deduplicator, id string, want receiver.ClaimState) receiver.Claim {
		t.Helper()
		c, err := d.Claim(ctx, id)
		if err != nil {
			t.Fatalf("Claim(%s): %v", id, err)
		}
		if c.State != want {
			t.Fatalf("Claim(%s) = %s, want %s", id, c.State, want)
		}
		if c.ID != id || (c.State == receiver.Claimed) != (c.Token != "") {
			t.Fatalf("Claim(%s) = %+v: wrong id, or a token only when claimed expected", id, c)
		}
		return c
	}
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("claim, complete, duplicate", func(t *testing.T) {
		d := s.New(t, s.Lease, s.Retention)
		c := claim(t, d, "e1", receiver.Claimed)
		claim(t, d, "e1", receiver.InProgress)
		claim(t, d, "e2", receiver.Claimed)
		must(t, d.Complete(ctx, c))
		claim(t, d, "e1", receiver.Done)
		claim(t, d, "e1", receiver.Done)
	})

	t.Run("release lets the retry run", func(t *testing.T) {
		d := s.New(t, s.Lease, s.Retention)
		c := claim(t, d, "e1", receiver.Claimed)
		must(t, d.Release(ctx, c))
		again := claim(t, d, "e1", receiver.Claimed)
		if again.Token == c.Token {
			t.Fatal("a new claim has the released claim's token")
		}
		// The first claim's Release must not free the second one.
		must(t, d.Release(ctx, c))
		claim(t, d, "e1", receiver.InProgress)
		must(t, d.Complete(ctx, again))
		// Nor can a Release undo a completion.
		must(t, d.Release(ctx, again))
		claim(t, d, "e1", receiver.Done)
	})

	t.Run("a lease runs out", func(t *testing.T) {
		d := s.New(t, s.Lease, s.Retention)
		first := claim(t, d, "e1", receiver.Claimed)
		s.Advance(t, s.Lease+s.Lease/2)
		second := claim(t, d, "e1", receiver.Claimed)
		// The first holder, late, releases: the second keeps its claim.
		must(t, d.Release(ctx, first))
		claim(t, d, "e1", receiver.InProgress)
		must(t, d.Complete(ctx, second))
		claim(t, d, "e1", receiver.Done)
	})

	t.Run("a done id is forgotten after the retention", func(t *testing.T) {
		d := s.New(t, s.Lease, s.Retention)
		must(t, d.Complete(ctx, claim(t, d, "e1", receiver.Claimed)))
		s.Advance(t, s.Lease+s.Lease/2)
		claim(t, d, "e1", receiver.Done)
		s.Advance(t, s.Retention)
		claim(t, d, "e1", receiver.Claimed)
	})

	t.Run("one claim among concurrent deliveries", func(t *testing.T) {
		d := s.New(t, s.Lease, s.Retention)
		const n = 16
		states := make(chan receiver.ClaimState, n)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := d.Claim(ctx, "e1")
				if err != nil {
					t.Error(err)
					return
				}
				states <- c.State
			}()
		}
		wg.Wait()
		close(states)
		claimed := 0
		for st := range states {
			if st == receiver.Claimed {
				claimed++
			} else if st != receiver.InProgress {
				t.Errorf("concurrent Claim = %s", st)
			}
		}
		if claimed != 1 {
			t.Fatalf("%d of %d concurrent claims succeeded, want 1", claimed, n)
		}
	})
}

// Clock is a manual clock for a Deduplicator's Advance and its implementation's
// Now.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock stopped at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// RunStatusStore checks the contract of [receiver.StatusStore] on an
// empty store: nothing before the first SetStatus, then the last status
// set, per key.
func RunStatusStore(t *testing.T, s receiver.StatusStore) {
	t.Helper()
	ctx := context.Background()
	last := func(key, want string, wantOK bool) {
		t.Helper()
		got, ok, err := s.LastStatus(ctx, key)
		if err != nil || got != want || ok != wantOK {
			t.Fatalf("LastStatus(%s) = %q, %v, %v; want %q, %v", key, got, ok, err, want, wantOK)
		}
	}
	set := func(key, status string) {
		t.Helper()
		if err := s.SetStatus(ctx, key, status); err != nil {
			t.Fatalf("SetStatus(%s, %s): %v", key, status, err)
		}
	}
	last("payout:po_1", "", false)
	set("payout:po_1", "sent")
	last("payout:po_1", "sent", true)
	set("payout:po_1", "returned")
	last("payout:po_1", "returned", true)
	last("payout:po_2", "", false)
	last("return:po_1", "", false)
	set("return:po_1", "failed")
	last("return:po_1", "failed", true)
	last("payout:po_1", "returned", true)
}
