package redisdedup_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/receiver/receivertest"
	"github.com/webhookd/webhookd/receiver/redisdedup"
)

func newClient(t *testing.T) *redis.Client {
	t.Helper()
	rd := storetest.NewRedis(t)
	rc := redis.NewClient(&redis.Options{Network: "unix", Addr: rd.Socket})
	t.Cleanup(func() { rc.Close() })
	return rc
}

// TestContract runs the shared contract on a private Redis. Redis expires
// keys on its own clock, which a test cannot move: Advance moves the keys
// instead, taking d off every TTL and deleting those it runs out, which
// is all that time does to this Deduplicator's state.
func TestContract(t *testing.T) {
	t.Parallel()
	rc := newClient(t)
	n := 0
	receivertest.RunDeduplicator(t, receivertest.Deduplicator{
		New: func(t *testing.T, lease, retention time.Duration) receiver.Deduplicator {
			n++ // a prefix per subtest keeps their keys apart
			d, err := redisdedup.New(redisdedup.Config{Client: rc, Prefix: "t" + strings.Repeat("x", n) + ":",
				Lease: lease, Retention: retention})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Advance: func(t *testing.T, d time.Duration) { advanceTTLs(t, rc, d) },
		Lease:   time.Minute, Retention: time.Hour,
	})
}

// advanceTTLs ages every key of the Redis behind rc by d, as d passing
// would: its TTL shortened by d, or the key gone when d outlasts it.
func advanceTTLs(t *testing.T, rc *redis.Client, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		ttl, err := rc.PTTL(ctx, key).Result()
		switch {
		case err != nil:
			t.Fatal(err)
		case ttl < 0: // no TTL, or gone meanwhile
		case ttl <= d:
			err = rc.Del(ctx, key).Err()
		default:
			err = rc.PExpire(ctx, key, ttl-d).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestKeys: the keys are where the package documentation says, with the
// lease and then the retention as their TTL.
func TestKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rc := newClient(t)
	d, err := redisdedup.New(redisdedup.Config{Client: rc, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Claim(ctx, "e1")
	if err != nil {
		t.Fatal(err)
	}
	key := redisdedup.DefaultPrefix + "e1"
	if v, _ := rc.Get(ctx, key).Result(); v != c.Token {
		t.Errorf("claimed key holds %q, want the token %q", v, c.Token)
	}
	if ttl := rc.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("claimed key TTL %s, want the one-minute lease", ttl)
	}
	if err := d.Complete(ctx, c); err != nil {
		t.Fatal(err)
	}
	if ttl := rc.PTTL(ctx, key).Val(); ttl <= 29*24*time.Hour || ttl > receiver.DefaultRetention {
		t.Errorf("done key TTL %s, want the default retention", ttl)
	}
	if _, err := redisdedup.New(redisdedup.Config{}); err == nil {
		t.Error("New without a client succeeded")
	}
}
