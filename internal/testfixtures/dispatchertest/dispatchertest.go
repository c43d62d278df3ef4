// Package dispatchertest gives the tests of the delivery pipeline's
// packages (dispatcher and its roles, the destination kinds) the engine
// as Run and New assemble it, on a fresh database and a private Redis:
// an Env, receivers that record what they get, and waits on state, never
// on time. Only tests import it.
package dispatchertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/kindstest"
	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/signer"
)

// TestVersion is the API version the Env's merchants are pinned to.
const TestVersion = "2026-05-01"

// Env is a pipeline on a fresh database and a private Redis.
type Env struct {
	T     *testing.T
	Store *store.Store
	// Redis is the private Redis server; nil on a Cluster (NewCluster).
	Redis *storetest.Redis
	// Cluster is the Redis Cluster of NewCluster, nil otherwise.
	Cluster *storetest.Cluster
	// RC is a client of the pipeline's Redis.
	RC     redis.UniversalClient
	Sealer *signer.Sealer
	// Cfg is the Config Dispatcher builds on; a test may change it first.
	Cfg dispatcher.Config
}

// FastSchedule keeps retries in milliseconds.
var FastSchedule = retry.Schedule{Delays: []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}}

// New is an Env on a fresh database and a private Redis.
func New(t *testing.T) *Env {
	t.Helper()
	return on(t, storetest.NewStore(t))
}

// NewOnPostgres is New on a fresh database of pg, a private Postgres
// server the test may stop and start again.
func NewOnPostgres(t *testing.T, pg *storetest.Postgres) *Env {
	t.Helper()
	st, err := store.Open(context.Background(), storetest.NewDatabaseOn(t, pg.AdminURL()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return on(t, st)
}

// on is New on the given store.
func on(t *testing.T, st *store.Store) *Env {
	t.Helper()
	rd := storetest.NewRedis(t)
	rc := redis.NewClient(&redis.Options{Network: "unix", Addr: rd.Socket})
	t.Cleanup(func() { rc.Close() })
	sealer, err := signer.NewSealer(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	e := &Env{T: t, Store: st, Redis: rd, RC: rc, Sealer: sealer}
	e.Cfg = dispatcher.Config{
		Store: st, Redis: asynq.RedisClientOpt{Network: "unix", Addr: rd.Socket},
		Schedule: FastSchedule, DeliveryTimeout: 500 * time.Millisecond,
		AllowHTTPTargets: true, AllowPrivateTargets: true, Concurrency: 8, Sealer: sealer,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		SweepInterval: time.Second, SweepGrace: 100 * time.Millisecond, DefaultAPIVersion: TestVersion,
		Version: "test", Kinds: kindstest.Registry(t, nil),
	}
	return e
}

// NewCluster is New on a Redis Cluster of three masters, each with a
// replica (e.Cluster; e.Redis is nil: there is no single server to
// stop), reached as WEBHOOKD_REDIS_URL reaches it.
func NewCluster(t *testing.T) *Env {
	t.Helper()
	e := New(t)
	e.Cluster = storetest.NewReplicatedCluster(t)
	conn, err := producer.ParseRedisURL(e.Cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	e.Redis, e.RC, e.Cfg.Redis = nil, conn.NewClient(), producer.AsynqRedisOpt(conn)
	t.Cleanup(func() { e.RC.Close() })
	return e
}

// Dispatcher builds a Dispatcher on the env's config (adjusted by
// configure) with its own metrics registry.
func (e *Env) Dispatcher(configure ...func(*dispatcher.Config)) (*dispatcher.Dispatcher, *prometheus.Registry) {
	e.T.Helper()
	cfg := e.Cfg
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	for _, c := range configure {
		c(&cfg)
	}
	d, err := dispatcher.New(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { d.Close() })
	return d, reg
}

// Run starts d.Run and returns a stop function that cancels it and waits
// for it to return (also called at cleanup).
func (e *Env) Run(d *dispatcher.Dispatcher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.T.Errorf("Run: %v", err)
			}
		})
	}
	e.T.Cleanup(stop)
	return stop
}

// MerchantSecret makes sure merchant exists (pinned to TestVersion) and
// gives it a new signing secret, with the secret sealed as it is stored.
func (e *Env) MerchantSecret(merchant string) (secret string, sealed []byte) {
	e.T.Helper()
	if _, err := e.Store.Merchants.EnsureMerchant(context.Background(), merchant, TestVersion); err != nil {
		e.T.Fatal(err)
	}
	secret, err := signer.NewSecret()
	if err != nil {
		e.T.Fatal(err)
	}
	if sealed, err = e.Sealer.Seal(secret); err != nil {
		e.T.Fatal(err)
	}
	return secret, sealed
}

// Subscribe creates an enabled subscription and returns it with its secret.
func (e *Env) Subscribe(merchant, url string, events ...string) (store.Subscription, string) {
	e.T.Helper()
	secret, sealed := e.MerchantSecret(merchant)
	sub, err := e.Store.Subscriptions.CreateSubscription(context.Background(), store.NewSubscription{MerchantID: merchant, URL: url, Events: events}, sealed)
	if err != nil {
		e.T.Fatal(err)
	}
	return sub, secret
}

// Publish publishes an event of typ for merchant through d.
func (e *Env) Publish(d *dispatcher.Dispatcher, merchant, typ string) store.Event {
	e.T.Helper()
	ev, created, err := d.Publisher.Publish(context.Background(), producer.Event{MerchantID: merchant, Type: typ,
		Payload: json.RawMessage(`{"id": "po_1", "status": "paid"}`)})
	if err != nil || !created {
		e.T.Fatalf("Publish = %v, created %v", err, created)
	}
	return ev
}

// PublishPayload publishes a payout.paid event of merchant with payload.
func (e *Env) PublishPayload(d *dispatcher.Dispatcher, merchant string, payload any) store.Event {
	e.T.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		e.T.Fatal(err)
	}
	ev, _, err := d.Publisher.Publish(context.Background(), producer.Event{MerchantID: merchant, Type: "payout.paid", Payload: raw})
	if err != nil {
		e.T.Fatal(err)
	}
	return ev
}

// UnworkedEvent subscribes rcv subs times to every event of m1, builds a
// dispatcher that sweeps every 200 ms, and publishes one event that no
// worker has run yet (the dispatcher is not running).
func (e *Env) UnworkedEvent(rcv *Receiver, subs int) (*dispatcher.Dispatcher, *prometheus.Registry, store.Event) {
	e.T.Helper()
	for range subs {
		e.Subscribe("m1", rcv.URL, "*")
	}
	d, reg := e.Dispatcher(func(c *dispatcher.Config) { c.SweepInterval, c.SweepGrace = 200*time.Millisecond, 100*time.Millisecond })
	return d, reg, e.Publish(d, "m1", "payout.paid")
}

// Deliveries lists the event's deliveries, with their attempts.
func (e *Env) Deliveries(eventID uuid.UUID) []store.Delivery {
	e.T.Helper()
	rows, err := e.Store.Pool().Query(context.Background(), `SELECT id FROM deliveries WHERE event_id = $1 ORDER BY id`, eventID)
	if err != nil {
		e.T.Fatal(err)
	}
	defer rows.Close()
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			e.T.Fatal(err)
		}
		ids = append(ids, id)
	}
	out := make([]store.Delivery, 0, len(ids))
	for _, id := range ids {
		out = append(out, e.Delivery(id))
	}
	return out
}

// Delivery is the delivery id, with its attempts.
func (e *Env) Delivery(id uuid.UUID) store.Delivery {
	e.T.Helper()
	d, err := e.Store.Deliveries.DeliveryByID(context.Background(), id)
	if err != nil {
		e.T.Fatal(err)
	}
	return d
}

// WaitFor polls until done holds or the deadline passes.
func (e *Env) WaitFor(what string, timeout time.Duration, done func() bool) {
	e.T.Helper()
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			e.T.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitIdle waits until no task is left on the pipeline's queues (none
// waiting, scheduled, retrying or running): from then on nothing can make
// an attempt, so what the receivers got is final. The sweeper's periodic
// task is a task like any other; WaitSwept makes sure it had its turn.
func (e *Env) WaitIdle() {
	e.T.Helper()
	insp := asynq.NewInspector(e.Cfg.Redis)
	defer insp.Close()
	e.WaitFor("the queues and the schedule to empty", 30*time.Second, func() bool {
		if n, err := ScheduleParked(context.Background(), e.RC); err != nil || n > 0 {
			return false
		}
		for _, q := range []string{"deliveries", producer.Queue} {
			info, err := insp.GetQueueInfo(q)
			if errors.Is(err, asynq.ErrQueueNotFound) {
				continue
			}
			if err != nil || info.Pending+info.Active+info.Scheduled+info.Retry > 0 {
				return false
			}
		}
		return true
	})
}

// WaitQuiet is WaitIdle, then waits until no delivery is pending in the
// database: an attempt a publish started in its own process's pool is
// never parked, so an empty schedule does not say it has ended. For tests
// whose every delivery ends (succeeds or fails for good).
func (e *Env) WaitQuiet() {
	e.T.Helper()
	e.WaitIdle()
	e.WaitFor("every delivery to end", 30*time.Second, func() bool {
		var pending int
		err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM deliveries WHERE status = $1`,
			store.DeliveryPending).Scan(&pending)
		return err == nil && pending == 0
	})
}

// WaitSwept waits until the sweeper has run once more from now, then until
// the queues are empty: what the sweeper would re-enqueue has then run.
func (e *Env) WaitSwept(reg *prometheus.Registry) {
	e.T.Helper()
	sweeps := func() float64 {
		return CounterWith(e.T, reg, "webhookd_tasks_total", "task", queue.TaskSweep)
	}
	before := sweeps()
	e.WaitFor("a sweep", 30*time.Second, func() bool { return sweeps() > before })
	e.WaitIdle()
}

// WaitSettled waits until the delivery is no longer pending and returns it.
func (e *Env) WaitSettled(id uuid.UUID, timeout time.Duration) store.Delivery {
	e.T.Helper()
	var d store.Delivery
	e.WaitFor("delivery "+id.String()+" to settle", timeout, func() bool {
		d = e.Delivery(id)
		return d.Status != store.DeliveryPending
	})
	return d
}

// Receiver is an HTTP endpoint on 127.0.0.1 that records what it gets and
// answers with respond.
type Receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []Received
}

// Received is one request a Receiver got, its path without the
// receiver's own prefix.
type Received struct {
	Path   string
	Header http.Header
	Body   []byte
	At     time.Time
}

// NewReceiver starts a receiver that answers with respond. Its URL
// carries a path of its own, and it answers anything else 404
// without counting it: packages' tests run at once, and an engine of
// another test may still be retrying to a port this receiver reuses.
func NewReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *Receiver {
	rc := &Receiver{}
	own := "/r" + uuid.NewString()
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, ok := strings.CutPrefix(r.URL.Path, own)
		if !ok {
			http.NotFound(w, r)
			return
		}
		r.URL.Path = path
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.requests = append(rc.requests, Received{Path: path, Header: r.Header.Clone(), Body: b, At: time.Now()})
		n := len(rc.requests)
		rc.mu.Unlock()
		respond(n, w, r)
	}))
	rc.URL += own
	t.Cleanup(rc.Close)
	return rc
}

// Got is every request so far, in the order they came.
func (rc *Receiver) Got() []Received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Received(nil), rc.requests...)
}

// Answer is a respond function that always answers status.
func Answer(status int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }
}

// Counter sums the values of a counter family in reg.
func Counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	return CounterWith(t, reg, name, "", "")
}

// CounterWith is Counter restricted to the series whose label has value
// (every series when label is "").
func CounterWith(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					match = true
				}
			}
			if match {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
