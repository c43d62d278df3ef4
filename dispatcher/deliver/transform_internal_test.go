package deliver

import (
	"context"
	"errors"
	"testing"
)

// TestMerchantTurns: a merchant runs one transformation at a time; its
// next waits (here: gives up with its context, since the turn is held),
// another merchant's does not wait, and a released turn is taken again;
// no entry outlives its users.
func TestMerchantTurns(t *testing.T) {
	var turns merchantTurns
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	release, err := turns.take(ctx, "m_a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turns.take(cancelled, "m_a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a second turn of m_a while the first is held = %v, want it to wait until its context ends", err)
	}
	other, err := turns.take(cancelled, "m_b")
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if other == nil {
		// A free turn and an ended context are both ready: select may
		// take either. Without the ended context, it is taken at once.
		if other, err = turns.take(ctx, "m_b"); err != nil {
			t.Fatalf("m_b waits for m_a: %v", err)
		}
	}
	other()
	release()
	again, err := turns.take(ctx, "m_a")
	if err != nil {
		t.Fatalf("m_a's turn after its release: %v", err)
	}
	again()
	if n := len(turns.held); n != 0 {
		t.Fatalf("%d turns kept with no user", n)
	}
}
