package storetest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// The private services come back after a stop, empty (Redis) or with their
// data (Postgres), as a real restart leaves them.
func TestPrivateServicesRestart(t *testing.T) {
	storetest.FullLane(t, "a private Postgres cluster, stopped and started")
	ctx := context.Background()

	pg := storetest.NewPostgres(t)
	url := storetest.NewDatabaseOn(t, pg.AdminURL())
	exec := func() error {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, `INSERT INTO merchants (id, api_version) VALUES ('m_restart', '2025-01-01') ON CONFLICT DO NOTHING`)
		return err
	}
	if err := exec(); err != nil {
		t.Fatal(err)
	}
	pg.Stop()
	if err := exec(); err == nil {
		t.Fatal("a stopped Postgres answered")
	}
	pg.Start()
	if err := exec(); err != nil {
		t.Fatalf("after restart: %v", err)
	}

	rd := storetest.NewRedis(t)
	opt, _ := redis.ParseURL(rd.URL())
	rc := redis.NewClient(opt)
	defer rc.Close()
	if err := rc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	rd.Stop()
	if rc.Ping(ctx).Err() == nil {
		t.Fatal("a stopped Redis answered")
	}
	rd.Start()
	if n, err := rc.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("after restart: exists=%d err=%v, want an empty Redis", n, err)
	}
}
