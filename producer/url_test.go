package producer_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/store/storetest"
)

// TestParseRedisURL reads every form WEBHOOKD_REDIS_URL takes, and what
// asynq makes of it.
func TestParseRedisURL(t *testing.T) {
	for _, tc := range []struct {
		url, network, addr, user, password string
		db                                 int
		tls                                bool
	}{
		{"redis://127.0.0.1:6379/0", "tcp", "127.0.0.1:6379", "", "", 0, false},
		{"redis://:secret@redis.internal:6380/3", "tcp", "redis.internal:6380", "", "secret", 3, false},
		{"rediss://webhookd:secret@redis.example.com:6380/1", "tcp", "redis.example.com:6380", "webhookd", "secret", 1, true},
		{"unix:///run/redis/redis.sock?db=2", "unix", "/run/redis/redis.sock", "", "", 2, false},
		{"unix://:secret@/run/redis.sock", "unix", "/run/redis.sock", "", "secret", 0, false},
	} {
		parsed, err := producer.ParseRedisURL(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		o := producer.AsynqRedisOpt(parsed)
		if o.Network != tc.network || o.Addr != tc.addr || o.Username != tc.user || o.Password != tc.password ||
			o.DB != tc.db || (o.TLSConfig != nil) != tc.tls {
			t.Errorf("%s: asynq options %+v", tc.url, o)
		}
	}
	for _, bad := range []string{"", "http://127.0.0.1:6379", "redis://127.0.0.1:6379/notadb", "127.0.0.1:6379"} {
		_, err := producer.ParseRedisURL(bad)
		if err == nil || !strings.Contains(err.Error(), "expected a Redis URL") {
			t.Errorf("ParseRedisURL(%q) = %v, want an error saying the forms", bad, err)
		}
		if _, err := producer.NewFromURL(bad); err == nil {
			t.Errorf("NewFromURL(%q) accepted it", bad)
		}
	}
}

// TestNewFromURL publishes through a Producer made from a URL, with
// options, and finds the task where webhookd's workers look.
func TestNewFromURL(t *testing.T) {
	rd := storetest.NewRedis(t)
	p, err := producer.NewFromURL(rd.URL()+"?db=4", producer.WithPoolSize(2))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	e := producer.Event{ID: uuid.NewString(), MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{"id":"po_1"}`)}
	if err := p.Publish(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspector(asynq.RedisClientOpt{Network: "unix", Addr: rd.Socket, DB: 4})
	defer insp.Close()
	if _, err := insp.GetTaskInfo(producer.Queue, "e:"+e.ID); err != nil {
		t.Fatalf("the published task in database 4: %v", err)
	}

}
