package receiver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/receiver/receivertest"
)

func TestMemoryDeduplicatorContract(t *testing.T) {
	t.Parallel()
	var clock *receivertest.Clock
	receivertest.RunDeduplicator(t, receivertest.Deduplicator{
		New: func(t *testing.T, lease, retention time.Duration) receiver.Deduplicator {
			clock = receivertest.NewClock(time.Unix(1795000000, 0))
			d, err := receiver.NewMemoryDeduplicator(receiver.MemoryDeduplicatorConfig{Lease: lease, Retention: retention, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Advance: func(_ *testing.T, d time.Duration) { clock.Advance(d) },
		Lease:   time.Minute, Retention: time.Hour,
	})
}

// TestMemoryDeduplicatorBounded: the store never holds more than
// MaxEntries ids; the oldest go first, and expired ones are dropped as new
// ones come.
func TestMemoryDeduplicatorBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := receivertest.NewClock(time.Unix(1795000000, 0))
	d, err := receiver.NewMemoryDeduplicator(receiver.MemoryDeduplicatorConfig{
		Lease: time.Minute, Retention: time.Hour, MaxEntries: 3, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		c, err := d.Claim(ctx, fmt.Sprint("e", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Complete(ctx, c); err != nil {
			t.Fatal(err)
		}
		if d.Len() > 3 {
			t.Fatalf("%d entries after %d events, want at most 3", d.Len(), i+1)
		}
	}
	for id, want := range map[string]receiver.ClaimState{"e4": receiver.Done, "e3": receiver.Done, "e0": receiver.Claimed} {
		if c, _ := d.Claim(ctx, id); c.State != want {
			t.Errorf("%s: %s, want %s", id, c.State, want)
		}
	}

	clock.Advance(2 * time.Hour)
	if _, err := d.Claim(ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	if d.Len() != 1 {
		t.Errorf("%d entries after the retention passed, want only the fresh one", d.Len())
	}
}
