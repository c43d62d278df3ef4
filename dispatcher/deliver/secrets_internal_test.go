package deliver

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/signer"
)

// TestSecretCacheStaysBounded: more subscriptions attempted within a
// minute than the cache holds (10,000 merchants with 10 subscriptions
// each) leave it at its bound, and a subscription still in it is served
// without reading Postgres. The cache was a map swept for entries unused
// for a minute once full: none was, so it grew with every subscription
// and every attempt swept all of it.
func TestSecretCacheStaysBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	sealer := newTestSealer(t)
	if _, err := st.Merchants.EnsureMerchant(ctx, "m1", "2026-05-01"); err != nil {
		t.Fatal(err)
	}
	secret, err := signer.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := sealer.Seal(secret)
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/h", Events: []string{"*"}}, sealed)
	if err != nil {
		t.Fatal(err)
	}
	// A small cache, so that more subscriptions than it holds take
	// little time.
	const bound = 100
	n := bound + bound/2
	// Copies of the first subscription, each with its secret.
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO subscriptions
		 SELECT (jsonb_populate_record(NULL::subscriptions, to_jsonb(s) || jsonb_build_object('id', gen_random_uuid()))).*
		 FROM subscriptions s, generate_series(2, $2::int) WHERE s.id = $1`, []any{first.ID, n}},
		{`INSERT INTO subscription_secrets (subscription_id, ciphertext, created_at)
		 SELECT s.id, x.ciphertext, x.created_at FROM subscriptions s, subscription_secrets x
		 WHERE x.subscription_id = $1 AND s.id <> $1 AND s.merchant_id = 'm1'`, []any{first.ID}},
	} {
		if _, err := st.Pool().Exec(ctx, stmt.sql, stmt.args...); err != nil {
			t.Fatalf("%v\n%s", err, stmt.sql)
		}
	}
	rows, err := st.Pool().Query(ctx, `SELECT id, updated_at FROM subscriptions WHERE merchant_id = 'm1' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type sub struct {
		id      uuid.UUID
		version time.Time
	}
	var subs []sub
	for rows.Next() {
		var s sub
		if err := rows.Scan(&s.id, &s.version); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	if err := rows.Err(); err != nil || len(subs) != n {
		t.Fatalf("%d subscriptions, %v", len(subs), err)
	}

	c := newSecretCache(st.Subscriptions, sealer, bound)
	now := time.Now()
	for i, s := range subs {
		// All within the same second: none is a minute old.
		keys, err := c.Keys(ctx, s.id, s.version, now.Add(time.Duration(i)*time.Microsecond))
		if err != nil || len(keys) != 1 {
			t.Fatalf("subscription %d: %d keys, %v", i, len(keys), err)
		}
	}
	if got := c.cache.Len(); got > bound {
		t.Errorf("%d subscriptions cached, bound %d", got, bound)
	}
	// The last one used is still cached: served with the database gone.
	last := subs[len(subs)-1]
	c.store = nil
	if keys, err := c.Keys(ctx, last.id, last.version, now); err != nil || len(keys) != 1 {
		t.Errorf("the subscription used last: %d keys, %v", len(keys), err)
	}
}
