package merchants_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// countingStore counts the writes a KeyUsage makes.
type countingStore struct {
	*store.Store
	writes int
}

func (c *countingStore) RecordAPIKeyUsage(ctx context.Context, lastUsed map[uuid.UUID]time.Time) error {
	c.writes++
	return c.Store.APIKeys.RecordAPIKeyUsage(ctx, lastUsed)
}

// TestKeyUsageWritesInBatches: many uses of many keys cost one write per
// flush, which keeps each key's latest use.
func TestKeyUsageWritesInBatches(t *testing.T) {
	t.Parallel()
	clock := newSettableClock()
	st := storetest.NewStore(t)
	ctx := context.Background()
	issuer := merchants.NewKeyIssuer(st.APIKeys, "sandbox", "2026-05-01")
	a, err := issuer.Create(ctx, "m1", []string{merchants.ScopeRead})
	if err != nil {
		t.Fatal(err)
	}
	b, err := issuer.Create(ctx, "m2", []string{merchants.ScopeRead})
	if err != nil {
		t.Fatal(err)
	}
	counting := &countingStore{Store: st}
	usage := merchants.NewKeyUsage(counting, clock.Now, nil)
	for range 1000 {
		usage.Seen(a.ID)
		usage.Seen(b.ID)
		clock.Advance(time.Millisecond)
	}
	lastA := clock.Now().Add(-time.Millisecond)
	if counting.writes != 0 {
		t.Fatalf("%d writes while seeing uses, want none", counting.writes)
	}
	if err := usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if counting.writes != 1 {
		t.Errorf("%d writes for 2000 uses and two flushes, want 1 (nothing new at the second)", counting.writes)
	}
	k, err := st.APIKeys.GetAPIKey(ctx, "m1", a.ID)
	if err != nil || k.LastUsedAt == nil || !k.LastUsedAt.Equal(lastA.Truncate(time.Microsecond)) {
		t.Errorf("last_used_at %v (%v), want %v", k.LastUsedAt, err, lastA)
	}

	// A failed flush keeps the uses for the next one.
	usage.Seen(a.ID)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := usage.Flush(cancelled); err == nil {
		t.Fatal("a flush on a cancelled context succeeded")
	}
	if err := usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if k, _ := st.APIKeys.GetAPIKey(ctx, "m1", a.ID); !k.LastUsedAt.Equal(clock.Now().Truncate(time.Microsecond)) {
		t.Errorf("after a failed flush and a good one, last_used_at %v, want %v", k.LastUsedAt, clock.Now())
	}

	var none *merchants.KeyUsage
	none.Seen(a.ID) // a nil KeyUsage records nothing, and does not panic
}

// TestKeyUsageRunFlushesAtShutdown: what Run saw is written when its
// context ends, without waiting for the interval.
func TestKeyUsageRunFlushesAtShutdown(t *testing.T) {
	t.Parallel()
	st := storetest.NewStore(t)
	ctx := context.Background()
	issued, err := merchants.NewKeyIssuer(st.APIKeys, "sandbox", "2026-05-01").Create(ctx, "m1", []string{merchants.ScopeRead})
	if err != nil {
		t.Fatal(err)
	}
	usage := merchants.NewKeyUsage(st.APIKeys, st.Now, nil)
	usage.Seen(issued.ID)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- usage.Run(runCtx, time.Hour) }()
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if k, err := st.APIKeys.GetAPIKey(ctx, "m1", issued.ID); err != nil || k.LastUsedAt == nil {
		t.Errorf("last_used_at after Run stopped: %v (%v)", k.LastUsedAt, err)
	}
}

// BenchmarkKeyUsageSeen is what noting a use adds to an authenticated
// request: a map write under a mutex, from many goroutines at once.
func BenchmarkKeyUsageSeen(b *testing.B) {
	usage := merchants.NewKeyUsage(nil, time.Now, nil)
	keys := make([]uuid.UUID, 64)
	for i := range keys {
		keys[i] = uuid.New()
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			usage.Seen(keys[i%len(keys)])
			i++
		}
	})
}
