package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestSubscriptionLimiter(t *testing.T) {
	ctx := context.Background()
	l := newSubscriptionLimiter(1)
	a, b := uuid.New(), uuid.New()
	if !l.acquireWithin(ctx, a, 0) {
		t.Fatal("first slot of a refused")
	}
	if !l.acquireWithin(ctx, b, 0) {
		t.Fatal("a's cap must not limit b")
	}
	start := time.Now()
	if l.acquireWithin(ctx, a, 30*time.Millisecond) {
		t.Fatal("a over its cap got a slot")
	}
	if waited := time.Since(start); waited < 30*time.Millisecond {
		t.Fatalf("gave up after %v, before the 30ms wait", waited)
	}
	// A waiter is woken by a's release, not by the wait running out.
	got := make(chan bool)
	go func() { got <- l.acquireWithin(ctx, a, 10*time.Second) }()
	time.Sleep(20 * time.Millisecond)
	l.release(b) // another subscription's release must not hand a's slot out
	l.release(a)
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("waiter refused after a's release")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by a's release")
	}
}
