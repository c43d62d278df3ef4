package redisdedup_test

import (
	"context"
	"testing"
	"time"

	"github.com/webhookd/webhookd/receiver/receivertest"
	"github.com/webhookd/webhookd/receiver/redisdedup"
)

func TestStatusStore(t *testing.T) {
	t.Parallel()
	rc := newClient(t)
	s, err := redisdedup.NewStatusStore(redisdedup.StatusStoreConfig{Client: rc, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	receivertest.RunStatusStore(t, s)
	key := redisdedup.DefaultStatusPrefix + "payout:po_1"
	if ttl := rc.PTTL(context.Background(), key).Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("%s TTL %s, want the one-hour retention", key, ttl)
	}
	if _, err := redisdedup.NewStatusStore(redisdedup.StatusStoreConfig{}); err == nil {
		t.Error("NewStatusStore without a client succeeded")
	}
}
