package dispatcher_test

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

const testVersion = "2026-05-01"

// env is a pipeline on a fresh database and a private Redis.
type env struct {
	t      *testing.T
	store  *store.Store
	redis  *storetest.Redis
	rc     redis.UniversalClient
	sealer *signer.Sealer
	cfg    dispatcher.Config
}

// fastSchedule keeps retries in milliseconds.
var fastSchedule = retry.Schedule{Delays: []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, storetest.NewStore(t))
}

// newEnvOn is newEnv on the given store.
func newEnvOn(t *testing.T, st *store.Store) *env {
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
	e := &env{t: t, store: st, redis: rd, rc: rc, sealer: sealer}
	e.cfg = dispatcher.Config{
		Store: st, Redis: asynq.RedisClientOpt{Network: "unix", Addr: rd.Socket},
		Schedule: fastSchedule, DeliveryTimeout: 500 * time.Millisecond,
		AllowHTTPTargets: true, AllowPrivateTargets: true, Concurrency: 8, Sealer: sealer,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		SweepInterval: time.Second, SweepGrace: 100 * time.Millisecond, DefaultAPIVersion: testVersion,
		Version: "test", Kinds: kindstest.Registry(t, nil),
	}
	return e
}

// newClusterEnv is newEnv on a Redis Cluster of three masters (e.redis is
// nil: there is no single server to stop).
func newClusterEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	cluster := storetest.NewCluster(t)
	conn, err := producer.ParseRedisURL(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	e.redis, e.rc, e.cfg.Redis = nil, conn.NewClient(), producer.AsynqRedisOpt(conn)
	t.Cleanup(func() { e.rc.Close() })
	return e
}

// dispatcher builds a Dispatcher on the env's config (adjusted by
// configure) with its own metrics registry.
func (e *env) dispatcher(configure ...func(*dispatcher.Config)) (*dispatcher.Dispatcher, *prometheus.Registry) {
	e.t.Helper()
	cfg := e.cfg
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	for _, c := range configure {
		c(&cfg)
	}
	d, err := dispatcher.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { d.Close() })
	return d, reg
}

// run starts d.Run and returns a stop function that cancels it and waits
// for it to return (also called at cleanup).
func (e *env) run(d *dispatcher.Dispatcher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("Run: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// subscribe creates an enabled subscription and returns it with its secret.
func (e *env) subscribe(merchant, url string, events ...string) (store.Subscription, string) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.store.Merchants.EnsureMerchant(ctx, merchant, testVersion); err != nil {
		e.t.Fatal(err)
	}
	secret, err := signer.NewSecret()
	if err != nil {
		e.t.Fatal(err)
	}
	sealed, err := e.sealer.Seal(secret)
	if err != nil {
		e.t.Fatal(err)
	}
	sub, err := e.store.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: merchant, URL: url, Events: events}, sealed)
	if err != nil {
		e.t.Fatal(err)
	}
	return sub, secret
}

// publish publishes an event of typ for merchant through d.
func (e *env) publish(d *dispatcher.Dispatcher, merchant, typ string) store.Event {
	e.t.Helper()
	ev, created, err := d.Publisher.Publish(context.Background(), producer.Event{MerchantID: merchant, Type: typ,
		Payload: json.RawMessage(`{"id": "po_1", "status": "paid"}`)})
	if err != nil || !created {
		e.t.Fatalf("Publish = %v, created %v", err, created)
	}
	return ev
}

// deliveries lists the event's deliveries, with their attempts.
func (e *env) deliveries(eventID uuid.UUID) []store.Delivery {
	e.t.Helper()
	rows, err := e.store.Pool().Query(context.Background(), `SELECT id FROM deliveries WHERE event_id = $1 ORDER BY id`, eventID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	out := make([]store.Delivery, 0, len(ids))
	for _, id := range ids {
		out = append(out, e.delivery(id))
	}
	return out
}

func (e *env) delivery(id uuid.UUID) store.Delivery {
	e.t.Helper()
	d, err := e.store.Deliveries.DeliveryByID(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// waitFor polls until done holds or the deadline passes.
func (e *env) waitFor(what string, timeout time.Duration, done func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitIdle waits until no task is left on the pipeline's queues (none
// waiting, scheduled, retrying or running): from then on nothing can make
// an attempt, so what the receivers got is final. The sweeper's periodic
// task is a task like any other; waitSwept makes sure it had its turn.
func (e *env) waitIdle() {
	e.t.Helper()
	insp := asynq.NewInspector(e.cfg.Redis)
	defer insp.Close()
	e.waitFor("the queues and the schedule to empty", 30*time.Second, func() bool {
		if n, err := dispatcher.ScheduleParked(context.Background(), e.rc); err != nil || n > 0 {
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

// waitSwept waits until the sweeper has run once more from now, then until
// the queues are empty: what the sweeper would re-enqueue has then run.
func (e *env) waitSwept(reg *prometheus.Registry) {
	e.t.Helper()
	sweeps := func() float64 {
		return counterWith(e.t, reg, "webhookd_tasks_total", "task", queue.TaskSweep)
	}
	before := sweeps()
	e.waitFor("a sweep", 30*time.Second, func() bool { return sweeps() > before })
	e.waitIdle()
}

// waitSettled waits until the delivery is no longer pending and returns it.
func (e *env) waitSettled(id uuid.UUID, timeout time.Duration) store.Delivery {
	e.t.Helper()
	var d store.Delivery
	e.waitFor("delivery "+id.String()+" to settle", timeout, func() bool {
		d = e.delivery(id)
		return d.Status != store.DeliveryPending
	})
	return d
}

// receiver is an HTTP endpoint on 127.0.0.1 that records what it gets and
// answers with respond.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []received
}

type received struct {
	Path   string
	Header http.Header
	Body   []byte
	At     time.Time
}

// newReceiver starts a receiver that answers with respond. Its URL
// carries a path of its own, and it answers anything else 404
// without counting it: packages' tests run at once, and an engine of
// another test may still be retrying to a port this receiver reuses.
func newReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{}
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
		rc.requests = append(rc.requests, received{Path: path, Header: r.Header.Clone(), Body: b, At: time.Now()})
		n := len(rc.requests)
		rc.mu.Unlock()
		respond(n, w, r)
	}))
	rc.URL += own
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) got() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.requests...)
}

// answer is a respond function that always answers status.
func answer(status int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }
}

// counter sums the values of a counter family in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	return counterWith(t, reg, name, "", "")
}

// counterWith is counter restricted to the series whose label has value
// (every series when label is "").
func counterWith(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
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
