package producer_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/producer"
)

// TestParseRedisURL reads every single-server form WEBHOOKD_REDIS_URL
// takes, and what asynq makes of it.
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
		o, ok := producer.AsynqRedisOpt(parsed).(asynq.RedisClientOpt)
		if !ok || o.Network != tc.network || o.Addr != tc.addr || o.Username != tc.user || o.Password != tc.password ||
			o.DB != tc.db || (o.TLSConfig != nil) != tc.tls {
			t.Errorf("%s: asynq options %+v", tc.url, o)
		}
	}
	for _, bad := range []string{"", "http://127.0.0.1:6379", "redis://127.0.0.1:6379/notadb", "127.0.0.1:6379",
		"redis-sentinel://", "redis-sentinel://s1:26379", "redis-sentinel://s1:26379/m/0/1", "redis-sentinel://s1:26379/m/x",
		"redis-sentinel://s1:26379,,s2/m", "redis-sentinel://s1:99999/m", "redis-sentinel://s1/m?db=2",
		"redis-cluster://", "redis-cluster://n1:7000/3", "redis-cluster://n1:7000?x=1", "redis-cluster://:7000"} {
		_, err := producer.ParseRedisURL(bad)
		if err == nil || !strings.Contains(err.Error(), "expected a Redis URL") {
			t.Errorf("ParseRedisURL(%q) = %v, want an error saying the forms", bad, err)
		}
		if _, err := producer.NewFromURL(bad); err == nil {
			t.Errorf("NewFromURL(%q) accepted it", bad)
		}
	}
}

// TestParseSentinelURL reads the Sentinel forms, and what asynq makes of
// them.
func TestParseSentinelURL(t *testing.T) {
	for _, tc := range []struct {
		url, master, user, password, sentinelUser, sentinelPassword string
		addrs                                                       []string
		db                                                          int
		tls                                                         bool
	}{
		{url: "redis-sentinel://s1:26379,s2:26380/mymaster", master: "mymaster", addrs: []string{"s1:26379", "s2:26380"}},
		{url: "redis-sentinel://:pw@s1,10.0.0.2/mymaster/3", master: "mymaster", password: "pw",
			addrs: []string{"s1:26379", "10.0.0.2:26379"}, db: 3},
		{url: "rediss-sentinel://app:pw@s1:26379/m/1?sentinel_username=sen&sentinel_password=spw", master: "m", user: "app",
			password: "pw", sentinelUser: "sen", sentinelPassword: "spw", addrs: []string{"s1:26379"}, db: 1, tls: true},
		{url: "redis-sentinel://[::1]:26379/m/", master: "m", addrs: []string{"[::1]:26379"}},
	} {
		parsed, err := producer.ParseRedisURL(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		o, ok := producer.AsynqRedisOpt(parsed).(asynq.RedisFailoverClientOpt)
		if !ok || o.MasterName != tc.master || strings.Join(o.SentinelAddrs, " ") != strings.Join(tc.addrs, " ") ||
			o.Username != tc.user || o.Password != tc.password || o.SentinelUsername != tc.sentinelUser ||
			o.SentinelPassword != tc.sentinelPassword || o.DB != tc.db || (o.TLSConfig != nil) != tc.tls {
			t.Errorf("%s: asynq options %+v", tc.url, o)
		}
		if got := strings.Join(parsed.Addrs(), " "); got != strings.Join(tc.addrs, " ") {
			t.Errorf("%s: Addrs() = %s", tc.url, got)
		}
		if parsed.NewClient().Close() != nil {
			t.Errorf("%s: closing the client failed", tc.url)
		}
	}
}

// TestParseClusterURL reads the Cluster forms, and what asynq makes of
// them.
func TestParseClusterURL(t *testing.T) {
	for _, tc := range []struct {
		url, user, password string
		addrs               []string
		tls                 bool
	}{
		{url: "redis-cluster://n1:7000,n2:7001", addrs: []string{"n1:7000", "n2:7001"}},
		{url: "redis-cluster://n1/0", addrs: []string{"n1:6379"}},
		{url: "rediss-cluster://app:pw@n1:7000/", user: "app", password: "pw", addrs: []string{"n1:7000"}, tls: true},
	} {
		parsed, err := producer.ParseRedisURL(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		parsed.SetPoolSize(7)
		opt, ok := producer.AsynqRedisOpt(parsed).(producer.ClusterConnOpt)
		if !ok {
			t.Fatalf("%s: asynq options %T", tc.url, producer.AsynqRedisOpt(parsed))
		}
		// asynq's clients and NewClient's are the same, tuned to follow a
		// failover within seconds (TestClusterFailover measures it).
		for name, c := range map[string]any{"asynq": opt.MakeRedisClient(), "NewClient": parsed.NewClient()} {
			rc, ok := c.(*redis.ClusterClient)
			if !ok {
				t.Fatalf("%s: %s made a %T", tc.url, name, c)
			}
			o := rc.Options()
			if strings.Join(o.Addrs, " ") != strings.Join(tc.addrs, " ") || o.Username != tc.user ||
				o.Password != tc.password || (o.TLSConfig != nil) != tc.tls || o.PoolSize != 7 ||
				o.ClusterStateReloadInterval != time.Second || o.ReadTimeout != time.Second || o.WriteTimeout != time.Second {
				t.Errorf("%s: %s options %+v", tc.url, name, o)
			}
			_ = rc.Close()
		}
	}
}

// TestPublishHighlyAvailable publishes through a Producer made from a
// Sentinel URL and from a Cluster URL, on real servers, and finds the
// task where webhookd's workers look.
func TestPublishHighlyAvailable(t *testing.T) {
	storetest.FullLane(t, "Redis Sentinel and Cluster")
	sentinel := storetest.NewSentinel(t)
	cluster := storetest.NewCluster(t)
	for _, url := range []string{sentinel.URL(), cluster.URL()} {
		p, err := producer.NewFromURL(url, producer.WithPoolSize(2))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		e := producer.Event{ID: uuid.NewString(), MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{"id":"po_1"}`)}
		if err := p.Publish(context.Background(), e); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		parsed, err := producer.ParseRedisURL(url)
		if err != nil {
			t.Fatal(err)
		}
		insp := asynq.NewInspector(producer.AsynqRedisOpt(parsed))
		defer insp.Close()
		if _, err := insp.GetTaskInfo(producer.Queue, "e:"+e.ID); err != nil {
			t.Fatalf("%s: the published task: %v", url, err)
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
