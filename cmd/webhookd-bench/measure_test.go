package main

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/procs"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

func TestPercentileNearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // reversed: summarize must sort
	}
	for _, tc := range []struct {
		name  string
		in    []time.Duration
		want  latencySummary
		wantN int
	}{
		{"empty", nil, latencySummary{}, 0},
		{"one", ms(7), latencySummary{N: 1, P50: 7 * time.Millisecond, P95: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond}, 1},
		{"1..100", ms(hundred...), latencySummary{N: 100, P50: 50 * time.Millisecond, P95: 95 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}, 100},
		{"outlier owns p99 of 10", ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 900), latencySummary{N: 10, P50: time.Millisecond, P95: 900 * time.Millisecond, P99: 900 * time.Millisecond, Max: 900 * time.Millisecond}, 10},
	} {
		if got := summarize(tc.in); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseMetricsSumsSeriesPerName(t *testing.T) {
	text := `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
process_resident_memory_bytes 1.048576e+08
webhookd_delivery_attempts_total{outcome="success"} 10
webhookd_delivery_attempts_total{outcome="timeout",note="a } in a label"} 5
bad_line{unterminated 3
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"process_cpu_seconds_total":        12.5,
		"process_resident_memory_bytes":    104857600,
		"webhookd_delivery_attempts_total": 15,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if _, ok := m["bad_line"]; ok {
		t.Error("malformed line parsed")
	}
}

func TestPidRSS(t *testing.T) {
	if rss, err := pidRSS(os.Getpid()); err != nil || rss <= 0 {
		t.Errorf("own RSS: %d, %v", rss, err)
	}
}

func TestIsPostgresOf(t *testing.T) {
	for _, tc := range []struct {
		cmdline string
		want    bool
	}{
		{"/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main", true},
		{"postgres: 15/main: checkpointer ", true},
		{"postgres: walwriter ", true},
		{"postgres: 15/main: postgres webhookd 127.0.0.1(51234) idle", true},
		{"postgres: postgres webhookd 127.0.0.1(51234) INSERT", true},
		{"postgres: 15/main: postgres webhookd_test_ab12 127.0.0.1(51234) idle", false},
		{"postgres: 15/main: postgres other [local] idle", false},
	} {
		if got := isPostgresOf(tc.cmdline, "webhookd"); got != tc.want {
			t.Errorf("isPostgresOf(%q) = %v, want %v", tc.cmdline, got, tc.want)
		}
	}
}

func TestRedisFigures(t *testing.T) {
	r := storetest.NewRedis(t)
	opt, err := redis.ParseURL(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	before, err := redisUsedMemory(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "big", strings.Repeat("x", 1<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	after, err := redisUsedMemory(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 1<<20 {
		t.Errorf("used_memory grew %d bytes for a 1 MiB value", after-before)
	}
	if _, ok := redisCPU(ctx, rdb); !ok {
		t.Error("redis CPU not read")
	}
}

// benchDatabase is a fresh database of the engine's schema and the bench's
// pool on it, closed when the test ends.
func benchDatabase(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	url := storetest.NewDatabase(t)
	db, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return url, db
}

// TestDatabaseFigures checks the measurement queries against the real
// schema: an event with one delivery and one succeeded attempt is counted,
// and the tables it lands in grow.
func TestDatabaseFigures(t *testing.T) {
	ctx := context.Background()
	url, db := benchDatabase(t)
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	before, err := tableSizes(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, tbl := range storedTables {
		if _, ok := before[tbl]; !ok {
			t.Fatalf("no size for %s", tbl)
		}
	}
	const merchant = "m_bench"
	if _, err := st.Merchants.EnsureMerchant(ctx, merchant, "2026-05-01"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: merchant, URL: "http://127.0.0.1:1/x",
		Events: []string{"*"}}, []byte("sealed")); err != nil {
		t.Fatal(err)
	}
	now := st.Now().Truncate(time.Millisecond)
	var deliveries []store.Delivery
	for i := range 50 {
		id := uuid.Must(uuid.NewV7())
		_, ds, _, err := st.Events.CreateEvent(ctx, store.Event{ID: id, MerchantID: merchant, Type: benchEventType,
			APIVersion: "2026-05-01", Body: json.RawMessage(payloadFor("t", i, 1024)), CreatedAt: now}, store.Audience{})
		if err != nil {
			t.Fatal(err)
		}
		deliveries = append(deliveries, ds...)
	}
	if len(deliveries) != 50 {
		t.Fatalf("%d deliveries, want 50", len(deliveries))
	}
	status := 204
	for i, d := range deliveries {
		a := store.Attempt{Number: 1, Status: store.AttemptSucceeded, Trigger: store.TriggerScheduled, HTTPStatus: &status, AttemptedAt: now}
		next := store.DeliverySucceeded
		if i%2 == 1 { // half fail: recorded, attempted, but not completed
			a.Status, a.HTTPStatus, next = store.AttemptFailed, nil, store.DeliveryPending
		}
		if err := st.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: d, Attempt: a, Status: next}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		merchants []string
		recorded  int64
	}{
		{"the merchant", []string{merchant}, 25},
		{"another merchant", []string{"m_other"}, 0},
		{"both", []string{"m_other", merchant}, 25},
	} {
		n, err := recordedDeliveries(ctx, db, tc.merchants)
		if err != nil {
			t.Fatal(err)
		}
		if n != tc.recorded {
			t.Errorf("%s: recorded %d, want %d", tc.name, n, tc.recorded)
		}
	}
	attempted, attempts, err := attemptedDeliveries(ctx, db, []string{merchant})
	if err != nil || attempted != 50 || attempts != 50 {
		t.Errorf("attempted %d deliveries, %d attempts (%v), want 50 and 50", attempted, attempts, err)
	}
	events, dels, err := storedCounts(ctx, db, []string{merchant})
	if err != nil || events != 50 || dels != 50 {
		t.Errorf("stored %d events, %d deliveries (%v), want 50 and 50", events, dels, err)
	}
	if n, err := pendingDeliveries(ctx, db, merchant); err != nil || n != 25 {
		t.Errorf("pending %d (%v), want 25", n, err)
	}
	after, err := tableSizes(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, tbl := range storedTables {
		if after[tbl] <= before[tbl] {
			t.Errorf("%s did not grow: %d -> %d bytes", tbl, before[tbl], after[tbl])
		}
	}
}

func TestParseMachineBusy(t *testing.T) {
	got, err := parseMachineBusy("cpu  100 5 50 9000 40 3 2 1 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
	if err != nil || got != 1.61 {
		t.Fatalf("busy %v (%v), want 1.61 s (user+nice+system+irq+softirq+steal)", got, err)
	}
	if _, err := parseMachineBusy("intr 1 2 3"); err == nil {
		t.Error("malformed /proc/stat accepted")
	}
	if machineBusy() <= 0 {
		t.Error("own machine busy time not read")
	}
}

func TestReportJSONKeepsOrderAndTargets(t *testing.T) {
	r := &report{scenario: "latency", params: "p"}
	r.add("b_first", 1.23456, "ms")
	r.addTarget("a_second", 120.0, "ms", "<= 100", false)
	r.note("n")
	b, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"scenario":"latency","params":"p","b_first":1.235,"a_second":120,` +
		`"targets":{"a_second":{"met":false,"target":"<= 100","unit":"ms"}},"notes":["n"]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	var line strings.Builder
	if err := r.write(&line, true); err != nil || line.String() != want+"\n" {
		t.Fatalf("-json line %q (%v), want the same object, unescaped", line.String(), err)
	}
}

// TestCPUPerDelivery checks the per-party figures every delivery scenario
// reports: the delta of two samples, in CPU ms per delivery, and a total
// over engine, Postgres and Redis only when all three are known.
func TestCPUPerDelivery(t *testing.T) {
	before := cpuSample{Engine: 10, Bench: 1, Postgres: 20, Redis: 3, Machine: 100, EngineOK: true, PostgresOK: true, RedisOK: true}
	after := cpuSample{Engine: 12, Bench: 1.5, Postgres: 23, Redis: 3.5, Machine: 110, EngineOK: true, PostgresOK: true, RedisOK: true}
	noRedis := after
	noRedis.RedisOK = false
	for _, tc := range []struct {
		name       string
		after      cpuSample
		deliveries int64
		want       cpuShare
	}{
		{"every party known", after, 1000,
			cpuShare{Engine: 2, Postgres: 3, Redis: 0.5, Total: 5.5, Bench: 0.5, EngineOK: true, PostgresOK: true, RedisOK: true}},
		{"twice the deliveries, half the share", after, 2000,
			cpuShare{Engine: 1, Postgres: 1.5, Redis: 0.25, Total: 2.75, Bench: 0.25, EngineOK: true, PostgresOK: true, RedisOK: true}},
		{"Redis unknown: no total", noRedis, 1000,
			cpuShare{Engine: 2, Postgres: 3, Redis: 0.5, Bench: 0.5, EngineOK: true, PostgresOK: true}},
		{"no deliveries: nothing to share", after, 0, cpuShare{}},
	} {
		if got := tc.after.sub(before).perDelivery(tc.deliveries); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestEngineProcessesSum(t *testing.T) {
	self := os.Getpid()
	if rss, err := pidsRSS([]int{self}); err != nil || rss <= 0 {
		t.Errorf("RSS of this process: %d, %v", rss, err)
	}
	if _, err := pidsCPU([]int{self}); err != nil {
		t.Errorf("CPU of this process: %v", err)
	}
	// A process that is gone fails the figure rather than shrinking it.
	if _, err := pidsCPU([]int{self, 0}); err == nil {
		t.Error("CPU summed without pid 0")
	}
	if _, err := pidsRSS([]int{self, 0}); err == nil {
		t.Error("RSS summed without pid 0")
	}
}

// TestPostgresOfThisServer finds the postmaster behind one of the bench's
// connections and sums its processes' CPU.
func TestPostgresOfThisServer(t *testing.T) {
	ctx := context.Background()
	_, db := benchDatabase(t)
	backend, err := backendPID(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	postmaster, err := postmasterOf(backend)
	if err != nil {
		t.Fatalf("the tests' Postgres runs on this machine: %v", err)
	}
	if st, err := procs.ReadStat(backend); err != nil || st.PPID != postmaster {
		t.Errorf("backend %d: %+v, %v; want a child of %d", backend, st, err, postmaster)
	}
	if _, err := postmasterOf(os.Getpid()); err == nil {
		t.Error("this test process taken for a postgres backend")
	}
	database := db.Config().ConnConfig.Database
	if _, ok := postgresCPU(database, postmaster); !ok {
		t.Error("no CPU read of the postmaster's processes")
	}
	if _, ok := postgresCPU(database, os.Getpid()); ok {
		t.Error("postgres processes counted under a postmaster that is not one")
	}
}

func TestReportTargetOnExistingFigure(t *testing.T) {
	r := &report{scenario: "single"}
	r.add("sweeper_requeued", int64(0), "deliveries")
	if !r.target("sweeper_requeued", "= 0", true) {
		t.Fatal("figure not found")
	}
	if r.target("absent", "= 0", true) {
		t.Error("target set on a figure never added")
	}
	b, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"scenario":"single","params":"","sweeper_requeued":0,"targets":{"sweeper_requeued":{"met":true,"target":"= 0","unit":"deliveries"}}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

// TestCommandCalls reads calls= of one command from INFO commandstats.
func TestCommandCalls(t *testing.T) {
	text := "# Commandstats\r\ncmdstat_evalsha:calls=1234,usec=5678,usec_per_call=4.60,rejected_calls=0,failed_calls=2\r\n" +
		"cmdstat_eval:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n"
	for command, want := range map[string]int64{"cmdstat_evalsha": 1234, "cmdstat_eval": 7, "cmdstat_fcall": 0} {
		if got := commandCalls(text, command); got != want {
			t.Errorf("commandCalls(%s) = %d, want %d", command, got, want)
		}
	}
}

// TestCommandCallCounts reads every command's calls= from INFO
// commandstats, subcommands (cmdstat_config|resetstat) included, and
// nothing from another section's lines.
func TestCommandCallCounts(t *testing.T) {
	text := "# Commandstats\r\ncmdstat_fcall:calls=2106,usec=2114471,usec_per_call=1004.02,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_zadd:calls=92239,usec=237594,usec_per_call=2.58,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=86,usec_per_call=86.00,rejected_calls=0,failed_calls=0\r\n" +
		"total_commands_processed:786035\r\n"
	got := commandCallCounts(text)
	want := map[string]int64{"cmdstat_fcall": 2106, "cmdstat_zadd": 92239, "cmdstat_config|resetstat": 1}
	if !maps.Equal(got, want) {
		t.Errorf("commandCallCounts = %v, want %v", got, want)
	}
}

// TestRedisCommandsPerDelivery: a run reports the commands Redis ran per
// delivery (the delta of two counts) when both counts were read, and
// nothing when one was not.
func TestRedisCommandsPerDelivery(t *testing.T) {
	before := cpuSample{RedisCommands: 1_000, RedisCommandsOK: true}
	after := cpuSample{RedisCommands: 20_000, RedisCommandsOK: true}
	unread := after
	unread.RedisCommandsOK = false
	for _, tc := range []struct {
		name  string
		after cpuSample
		want  string
	}{
		{"both counts read", after, `"redis_commands_per_delivery":19`},
		{"one count unread", unread, ""},
	} {
		r := &report{scenario: "peer"}
		(&meter{}).reportCPU(r, tc.after.sub(before), 1_000)
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		has := strings.Contains(string(b), "redis_commands_per_delivery")
		if tc.want == "" && has || tc.want != "" && !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %s, want %q", tc.name, b, cmp.Or(tc.want, "no redis_commands_per_delivery"))
		}
	}
}
