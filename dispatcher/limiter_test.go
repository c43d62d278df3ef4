package dispatcher

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestKeyedLimiter(t *testing.T) {
	ctx := context.Background()
	l := newKeyedLimiter(1, SystemClock{})
	a, b := "m_a", "m_b"
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
	for waiting := false; !waiting; {
		runtime.Gosched()
		l.mu.Lock()
		_, waiting = l.freed[a]
		l.mu.Unlock()
	}
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

// TestAttemptSlots is the order of the bounds an attempt must fit in: the
// pool, then its merchant's share, then its subscription's cap; a refusal
// gives back what was taken.
func TestAttemptSlots(t *testing.T) {
	ctx := context.Background()
	sub1, sub2, sub3 := uuid.New(), uuid.New(), uuid.New()
	at := func(merchant string, sub uuid.UUID) attemptTask {
		return attemptTask{MerchantID: merchant, SubscriptionID: sub}
	}
	// A pool of 3, a merchant share of 2, a subscription cap of 1.
	s := newAttemptSlots(3, 2, 1, time.Second, SystemClock{})
	take := func(a attemptTask) (func(), bool) {
		t.Helper()
		held, backOff, ok, err := s.take(ctx, a, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if backOff <= 0 || backOff > 2*time.Second {
				t.Errorf("refused with a back-off of %v", backOff)
			}
			return nil, false
		}
		return held.release, true
	}
	r1, ok := take(at("m1", sub1))
	if !ok {
		t.Fatal("the first attempt was refused")
	}
	if _, ok := take(at("m1", sub1)); ok {
		t.Error("a subscription at its cap got a second slot")
	}
	r2, ok := take(at("m1", sub2))
	if !ok {
		t.Fatal("the merchant's second subscription was refused within its share")
	}
	if _, ok := take(at("m1", sub3)); ok {
		t.Error("a merchant at its share got a third slot through another subscription")
	}
	r3, ok := take(at("m2", sub3))
	if !ok {
		t.Fatal("another merchant was refused while the pool had room")
	}
	// The pool is full: the next attempt waits for a slot, here until its
	// context ends.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, _, _, err := s.take(short, at("m3", uuid.New()), 0); err == nil {
		t.Error("an attempt got a slot from a full pool")
	}
	r1()
	r4, ok := take(at("m3", uuid.New()))
	if !ok {
		t.Fatal("a slot given back was not taken")
	}
	for _, r := range []func(){r2, r3, r4} {
		r()
	}
	if s.pool.TryAcquire(3) {
		s.pool.Release(3)
	} else {
		t.Error("slots were not all given back")
	}
}

// TestSlotsEndSendFreesTheShare: once its HTTP exchange is over, an
// attempt that is still recording its outcome no longer counts against its
// merchant's share, only against the pool.
func TestSlotsEndSendFreesTheShare(t *testing.T) {
	ctx := context.Background()
	s := newAttemptSlots(2, 1, 1, time.Second, SystemClock{})
	a := attemptTask{MerchantID: "m1", SubscriptionID: uuid.New()}
	first, _, ok, err := s.take(ctx, a, 0)
	if err != nil || !ok {
		t.Fatalf("take = %v, %v", ok, err)
	}
	if _, _, ok, _ := s.take(ctx, a, 0); ok {
		t.Fatal("a second attempt of a merchant at its share was let in")
	}
	first.endSend()
	second, _, ok, err := s.take(ctx, a, 0)
	if err != nil || !ok {
		t.Fatalf("after endSend, take = %v, %v; want the share free", ok, err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, _, _, err := s.take(short, attemptTask{MerchantID: "m2", SubscriptionID: uuid.New()}, 0); err == nil {
		t.Error("the pool let a third attempt in while two hold it")
	}
	first.release()
	first.release() // idempotent
	second.release()
	if !s.pool.TryAcquire(2) {
		t.Error("slots were not all given back")
	}
}
