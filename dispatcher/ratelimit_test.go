package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/store/storetest"
)

func TestDeliveryRatesHoldEachSubscriptionToItsLimit(t *testing.T) {
	ctx := context.Background()
	rd := storetest.NewRedis(t)
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: rd.Socket})
	t.Cleanup(func() { _ = rdb.Close() })
	rates := newDeliveryRates(rdb)
	limited, other := uuid.New(), uuid.New()

	if wait, err := rates.take(ctx, limited, 0); err != nil || wait != 0 {
		t.Fatalf("no limit: wait %v, %v", wait, err)
	}
	if wait, err := rates.take(ctx, limited, 5); err != nil || wait != 0 {
		t.Fatalf("first of the second: wait %v, %v", wait, err)
	}
	// Burst 1: the next turn is a fifth of a second away.
	wait, err := rates.take(ctx, limited, 5)
	if err != nil || wait <= 100*time.Millisecond || wait > 200*time.Millisecond {
		t.Fatalf("second at once: wait %v, %v; want about 200ms", wait, err)
	}
	if wait, err := rates.take(ctx, other, 5); err != nil || wait != 0 {
		t.Fatalf("another subscription is not held back: wait %v, %v", wait, err)
	}
	// A turn within patience is waited for; one beyond it is not.
	if back, err := rates.await(ctx, limited, 5, 10*time.Millisecond); err != nil || back <= 0 {
		t.Fatalf("await with little patience = %v, %v; want a wait to go back on the queue for", back, err)
	}
	start := time.Now()
	if back, err := rates.await(ctx, limited, 5, 300*time.Millisecond); err != nil || back != 0 {
		t.Fatalf("await with patience = %v, %v; want the turn", back, err)
	}
	if took := time.Since(start); took > 300*time.Millisecond {
		t.Fatalf("await took %v", took)
	}
}
