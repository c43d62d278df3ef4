package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// The fault tests run the engine as operators do, an `api` process and a
// `worker` process, publish events while a fault strikes, and then hold the
// engine to its promises:
//
//   - every accepted event reaches every matching subscription at least once
//     (verified with the Standard Webhooks library), and no other;
//   - every delivery ends succeeded, with attempts numbered 1..attempt_count,
//     one record per number and the success last;
//   - every request a receiver saw is an attempt on record, except those a
//     crash cut off (they are re-run under the same number);
//   - the engine recovers by itself, reporting not-ready while a backing
//     service is down;
//   - no key, secret or token it used appears in its logs.
//
// Each scenario logs a report line: published, delivered, duplicates,
// recovery time.

// faultSchedule gives each delivery 15 attempts within a few seconds.
const faultSchedule = "100ms,200ms,300ms,400ms,500ms,500ms,500ms,500ms,500ms,500ms,500ms,500ms,500ms,500ms"

type faultScenario struct {
	name string
	// privatePostgres runs the engine on a private cluster the test may
	// stop.
	privatePostgres bool
	// answer is the receivers' behaviour; nil is acceptSoon.
	answer answerFunc
	// fault strikes while events are being published and returns when the
	// engine's environment is whole again.
	fault func(f *faultRun)
	// interruptible is true when attempts may be cut off without a record
	// (the worker process is killed, or the database is away longer than
	// an attempt's lease); they are made again under the same number.
	interruptible bool
}

func TestFaults(t *testing.T) {
	storetest.FullLane(t, "fault tests of the real binary")
	scenarios := []faultScenario{
		{
			name:          "worker SIGKILL and restart",
			interruptible: true,
			fault: func(f *faultRun) {
				f.worker.kill()
				// The fault: no worker while half a second's worth of
				// events is accepted.
				f.waitUnderWay(f.acceptedCount()+25, 30*time.Second)
				f.worker = f.e.spawn("worker", f.worker.internal)
			},
		},
		{
			name: "Redis restart",
			fault: func(f *faultRun) {
				f.e.redis.Stop()
				f.waitOutageSeen()
				f.e.redis.Start()
			},
		},
		{
			name: "Redis FLUSHALL",
			fault: func(f *faultRun) {
				opt, _ := redis.ParseURL(f.e.redis.URL())
				rc := redis.NewClient(opt)
				defer rc.Close()
				if err := rc.FlushAll(context.Background()).Err(); err != nil {
					f.t.Errorf("FLUSHALL: %v", err)
				}
			},
		},
		{
			name:            "Postgres restart",
			privatePostgres: true,
			// An outcome that cannot be recorded before the lease lapses
			// (and the sweeper's grace after it) is attempted again.
			interruptible: true,
			fault: func(f *faultRun) {
				f.pg.Stop()
				f.waitOutageSeen()
				f.pg.Start()
			},
		},
		{
			name:   "receivers reset, stall, fail and answer late",
			answer: receiverMix{reset: 0.2, fail: 0.2, slow: 0.15, late: 0.1}.answer,
			fault:  func(*faultRun) {},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runFault(t, sc)
		})
	}
}

// receiverMix is a receiver that, at random with these odds, resets the
// connection, answers 5xx, answers slowly but in time, or answers 2xx after
// the delivery timeout (the receiver has the event, the engine gave up on
// the attempt and will deliver again); otherwise it accepts.
type receiverMix struct{ reset, fail, slow, late float64 }

// answer is the mix as an answerFunc.
func (m receiverMix) answer(rng *rand.Rand, w http.ResponseWriter, timeout time.Duration) bool {
	switch p := rng.Float64(); {
	case p < m.reset:
		resetConnection(w)
		return false
	case p < m.reset+m.fail:
		w.WriteHeader([]int{500, 502, 503}[rng.IntN(3)])
		return false
	case p < m.reset+m.fail+m.slow:
		// Kept: the behaviour under test is a slow receiver, and a slow
		// receiver is one that takes its time.
		time.Sleep(timeout / 3)
	case p < m.reset+m.fail+m.slow+m.late:
		time.Sleep(timeout + 200*time.Millisecond) // kept: and a late one, past the delivery timeout
	}
	w.WriteHeader(http.StatusNoContent)
	return true
}

// resetConnection closes the connection with a TCP reset.
func resetConnection(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// faultRun is one scenario's engine, receivers and record.
type faultRun struct {
	t           *testing.T
	e           *engine
	pg          *storetest.Postgres
	dbURL       string
	api, worker *process
	// others are further processes whose logs are checked too.
	others []*process
	key    string
	subs   []*faultSub

	mu sync.Mutex
	// seen counts, per subscription path and webhook-id, the requests the
	// receiver got and those it answered 2xx.
	seen    map[string]*receipt
	badSigs int
	// accepted is every event the engine accepted, in order.
	accepted []published
	// ingest are the internal listeners events are published to, in turn;
	// empty: the engine's.
	ingest    []string
	published int
	// retried counts publishes that had to be sent again.
	retried int
}

type receipt struct{ requests, accepted int }

// published is an accepted event.
type published struct{ id, typ string }

// faultSub is a subscription and what it should receive.
type faultSub struct {
	path   string
	events []string
	secret string
}

func (s faultSub) matches(eventType string) bool {
	for _, e := range s.events {
		if e == "*" || e == eventType {
			return true
		}
	}
	return false
}

// answerFunc is a receiver's behaviour; it reports whether it answered 2xx.
type answerFunc func(rng *rand.Rand, w http.ResponseWriter, timeout time.Duration) bool

// acceptSoon answers 204 after a short pause, so that attempts are in
// flight when a fault strikes.
func acceptSoon(rng *rand.Rand, w http.ResponseWriter, _ time.Duration) bool {
	// Kept: the receiver's pause is the behaviour, and what keeps attempts
	// in flight when a fault strikes.
	time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
	w.WriteHeader(http.StatusNoContent)
	return true
}

// newFaultRun starts an api and a worker process (on a private Postgres
// cluster if privatePostgres) with three subscriptions, to every event, to
// payout.paid and to payout.failed, served by one receiver.
func newFaultRun(t *testing.T, privatePostgres bool, answer answerFunc, timeout time.Duration, env ...string) *faultRun {
	t.Helper()
	f := &faultRun{t: t, seen: map[string]*receipt{}}
	if privatePostgres {
		f.pg = storetest.NewPostgres(t)
		f.dbURL = storetest.NewDatabaseOn(t, f.pg.AdminURL())
	} else {
		f.dbURL = storetest.NewDatabase(t)
	}
	f.e = newEngineOn(t, f.dbURL, append([]string{"WEBHOOKD_RETRY_SCHEDULE=" + faultSchedule,
		"WEBHOOKD_DELIVERY_TIMEOUT=" + timeout.String(), "WEBHOOKD_SWEEP_INTERVAL=1s"}, env...)...)
	f.api = f.e.spawn("api", f.e.internal)
	f.worker = f.e.spawn("worker", storetest.FreeAddr(t))

	f.subscribe(answer, timeout)
	return f
}

// subscribe creates the run's three subscriptions, to every event, to
// payout.paid and to payout.failed, served by one receiver.
func (f *faultRun) subscribe(answer answerFunc, timeout time.Duration) {
	t := f.t
	t.Helper()
	f.key = f.e.keysCreate("m_fault")
	f.subs = []*faultSub{
		{path: "/all", events: []string{"*"}},
		{path: "/paid", events: []string{"payout.paid"}},
		{path: "/failed", events: []string{"payout.failed"}},
	}
	recv := httptest.NewServer(f.receiver(f.subs, answer, timeout))
	t.Cleanup(recv.Close)
	for _, s := range f.subs {
		status, sub := f.e.call("POST", "http://"+f.e.public+"/v1/webhook_subscriptions", f.key,
			map[string]any{"url": recv.URL + s.path, "events": s.events})
		if status != 201 {
			t.Fatalf("create subscription: %d %v", status, sub)
		}
		f.mu.Lock()
		s.secret = sub["secret"].(string)
		f.mu.Unlock()
	}
}

// publishEvents publishes events, alternately payout.paid and
// payout.failed, one every gap, until n are published (n < 0: until stop
// is closed), and closes done.
func (f *faultRun) publishEvents(n int, gap time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for i := 0; n < 0 || i < n; i++ {
		select {
		case <-stop:
			return
		default:
		}
		typ := []string{"payout.paid", "payout.failed"}[i%2]
		id := uuid.NewString()
		if f.publish(id, typ) {
			f.mu.Lock()
			f.accepted = append(f.accepted, published{id, typ})
			f.mu.Unlock()
		}
		time.Sleep(gap) // kept: the publisher's pace, the load the faults strike under
	}
}

// acceptedCount is how many events the engine has accepted so far.
func (f *faultRun) acceptedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.accepted)
}

// waitUnderWay waits until the engine has accepted at least n events and
// the receivers have had a request: publishing and delivering are under
// way.
func (f *faultRun) waitUnderWay(n int, within time.Duration) {
	f.t.Helper()
	waitFor(f.t, fmt.Sprintf("%d events accepted and deliveries under way", n), within, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.accepted) >= n && len(f.seen) > 0
	})
}

func runFault(t *testing.T, sc faultScenario) {
	const (
		events  = 150
		timeout = time.Second
	)
	answer := sc.answer
	if answer == nil {
		answer = acceptSoon
	}
	f := newFaultRun(t, sc.privatePostgres, answer, timeout)

	// Publish at about 50 events a second; the fault strikes a third of
	// the way in (about a second), while deliveries are under way.
	done := make(chan struct{})
	go f.publishEvents(events, 20*time.Millisecond, nil, done)
	f.waitUnderWay(events/3, 30*time.Second)
	struck := time.Now()
	sc.fault(f)
	restored := time.Now()
	ready := f.waitReady(60 * time.Second)
	<-done
	if len(f.accepted) != events {
		t.Errorf("%d of %d events were accepted; the publisher retries each for a minute", len(f.accepted), events)
	}
	v := f.verify(90*time.Second, sc.interruptible)
	drained := time.Since(restored) - v.checking

	t.Logf("REPORT %s: published %d events (%d deliveries); delivered %d/%d; attempts %d; receiver requests %d (%d cut off by the fault);"+
		" duplicates %d (%.2f%%); fault lasted %s; ready again %s after; all delivered %s after",
		sc.name, v.events, v.deliveries, v.deliveries, v.deliveries, v.attempts, v.requests, v.interrupted,
		v.duplicates, 100*float64(v.duplicates)/float64(v.deliveries), restored.Sub(struck).Round(time.Millisecond),
		ready.Round(time.Millisecond), drained.Round(time.Millisecond))
}

// verification is what verify found.
type verification struct {
	events, deliveries, attempts, requests, interrupted, duplicates int
	// checking is how long the checks after the last delivery took.
	checking time.Duration
}

// verify waits, up to within, until every accepted event has reached every
// matching subscription, then checks the records, the receivers' counts
// and the logs. interruptible allows requests without an attempt on record
// (attempts cut off and made again under the same number).
func (f *faultRun) verify(within time.Duration, interruptible bool) verification {
	t := f.t
	t.Helper()
	f.mu.Lock()
	accepted := slices.Clone(f.accepted)
	f.mu.Unlock()
	var v verification
	v.events = len(accepted)
	deadline := time.Now().Add(within)
	for _, ev := range accepted {
		for _, s := range f.subs {
			if !s.matches(ev.typ) {
				continue
			}
			v.deliveries++
			if !eventually(time.Until(deadline), func() bool { return f.receipt(s.path, ev.id).accepted > 0 }) {
				fatalWithLogs(t, fmt.Sprintf("event %s (%s) never reached %s; its deliveries: %s", ev.id, ev.typ, s.path, f.describe(ev.id)),
					"api logs:\n"+tail(f.api.logs)+"\nworker logs:\n"+tail(f.worker.logs))
			}
		}
	}
	checkStart := time.Now()
	ids := make([]string, len(accepted))
	typeOf := make(map[string]string, len(accepted))
	for i, ev := range accepted {
		ids[i] = ev.id
		typeOf[ev.id] = ev.typ
	}
	stats := f.checkRecords(ids, v.deliveries, deadline)
	v.attempts = stats.attempts

	f.mu.Lock()
	unmatched := 0
	for k, r := range f.seen {
		v.requests += r.requests
		v.duplicates += max(r.accepted-1, 0)
		path, id, _ := strings.Cut(k, " ")
		if !slices.ContainsFunc(f.subs, func(s *faultSub) bool { return s.path == path && s.matches(typeOf[id]) }) {
			unmatched++
		}
	}
	badSigs := f.badSigs
	f.mu.Unlock()
	if badSigs > 0 {
		t.Errorf("%d requests failed Standard Webhooks verification", badSigs)
	}
	if unmatched > 0 {
		t.Errorf("%d events reached a subscription that does not match them", unmatched)
	}
	if v.requests < stats.answered {
		t.Errorf("%d attempts record an HTTP status but receivers saw only %d requests", stats.answered, v.requests)
	}
	// An attempt on record as a timeout or a network error may have
	// ended before its request was written (a deadline that struck while
	// dialling, on a loaded machine), so reached is the most requests the
	// records account for, not the least: receivers may have seen fewer.
	v.interrupted = max(v.requests-stats.reached, 0)
	if v.interrupted > 0 && !interruptible {
		t.Errorf("%d requests reached receivers without an attempt on record", v.interrupted)
	}
	f.checkLogs()
	v.checking = time.Since(checkStart)
	return v
}

// receiver serves every subscription's path: it verifies the signature
// with the published Standard Webhooks library, counts the request, and
// answers as answer decides.
func (f *faultRun) receiver(subs []*faultSub, answer answerFunc, timeout time.Duration) http.Handler {
	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		var sub *faultSub
		for _, s := range subs {
			if s.path == r.URL.Path {
				sub = s
			}
		}
		secret := ""
		if sub != nil {
			secret = sub.secret
		}
		f.mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(secret)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		if err != nil {
			f.mu.Lock()
			f.badSigs++
			f.mu.Unlock()
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		k := r.URL.Path + " " + r.Header.Get("webhook-id")
		f.mu.Lock()
		rc := f.seen[k]
		if rc == nil {
			rc = &receipt{}
			f.seen[k] = rc
		}
		rc.requests++
		f.mu.Unlock()
		rngMu.Lock()
		seed := rng.Uint64()
		rngMu.Unlock()
		if answer(rand.New(rand.NewPCG(seed, seed)), w, timeout) {
			f.mu.Lock()
			rc.accepted++
			f.mu.Unlock()
		}
	})
}

func (f *faultRun) receipt(path, id string) receipt {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.seen[path+" "+id]; r != nil {
		return *r
	}
	return receipt{}
}

// publish posts one event with its own id until the engine accepts it (202,
// or 200 for an id it already has), as a producer that must not lose an
// event does, for up to a minute.
func (f *faultRun) publish(id, typ string) bool {
	f.t.Helper()
	body, _ := json.Marshal(map[string]any{"id": id, "merchant_id": "m_fault", "type": typ,
		"payload": map[string]any{"id": "po_" + id[:8], "status": strings.TrimPrefix(typ, "payout.")}})
	addr := f.e.internal
	f.mu.Lock()
	if len(f.ingest) > 0 {
		addr = f.ingest[f.published%len(f.ingest)]
	}
	f.published++
	f.mu.Unlock()
	tries, refused := 0, false
	accepted := eventually(time.Minute, func() bool {
		if tries++; tries == 2 {
			f.mu.Lock()
			f.retried++
			f.mu.Unlock()
		}
		req, _ := http.NewRequest("POST", "http://"+addr+"/internal/v1/events", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e2eToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 500 && resp.StatusCode != 202 && resp.StatusCode != 200 {
			f.t.Errorf("publish %s: %d", id, resp.StatusCode)
			refused = true
		}
		return resp.StatusCode < 500
	})
	return accepted && !refused
}

// waitOutageSeen waits, while a backing service is down, until each of the
// api and the worker process has reported not-ready: the outage lasts until
// the engine has noticed it everywhere.
func (f *faultRun) waitOutageSeen() {
	f.t.Helper()
	seen := map[*process]bool{}
	if !eventually(30*time.Second, func() bool {
		for _, p := range []*process{f.api, f.worker} {
			seen[p] = seen[p] || !p.ready()
		}
		return seen[f.api] && seen[f.worker]
	}) {
		f.t.Fatalf("readyz did not report not-ready while a backing service was down (api %v, worker %v)", seen[f.api], seen[f.worker])
	}
}

// waitReady waits until both processes are ready again and returns how
// long that took.
func (f *faultRun) waitReady(within time.Duration) time.Duration {
	f.t.Helper()
	start := time.Now()
	if !eventually(within, func() bool { return f.api.ready() && f.worker.ready() }) {
		fatalWithLogs(f.t, fmt.Sprintf("the engine was not ready %s after the fault ended", within),
			"api logs:\n"+tail(f.api.logs)+"\nworker logs:\n"+tail(f.worker.logs))
	}
	return time.Since(start)
}

// recordStats sums the attempt records.
type recordStats struct {
	// attempts is every attempt on record; reached those that may have
	// got to a receiver (it answered, reset the connection or timed out);
	// answered those with an HTTP status, which certainly did.
	attempts, reached, answered int
}

// checkRecords waits until the want deliveries have ended and checks their
// records: one delivery per event and subscription, all succeeded, their
// attempts numbered 1..attempt_count with the one success last.
func (f *faultRun) checkRecords(accepted []string, want int, deadline time.Time) recordStats {
	f.t.Helper()
	ctx := context.Background()
	db, err := pgx.Connect(ctx, f.dbURL)
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close(ctx)
	var pending int
	if !eventually(time.Until(deadline), func() bool {
		if err := db.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE status <> 'succeeded'`).Scan(&pending); err != nil {
			f.t.Fatal(err)
		}
		return pending == 0
	}) {
		f.t.Fatalf("%d deliveries have not succeeded", pending)
	}
	var lost []string
	err = db.QueryRow(ctx, `SELECT coalesce(array_agg(id), '{}') FROM unnest($1::text[]) AS a(id)
		WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = a.id::uuid)`, accepted).Scan(&lost)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, id := range lost {
		f.t.Errorf("accepted event %s is not stored; %s", id, f.describe(id))
	}
	checks := []struct {
		what, query string
		want        int
	}{
		{"deliveries", `SELECT count(*) FROM deliveries`, want},
		{"distinct (event, subscription) deliveries", `SELECT count(DISTINCT (event_id, subscription_id)) FROM deliveries`, want},
		{"deliveries whose attempts are not numbered 1..attempt_count", `
			SELECT count(*) FROM deliveries d
			LEFT JOIN LATERAL (SELECT count(*) AS n, min(number) AS lo, max(number) AS hi FROM attempts a WHERE a.delivery_id = d.id) a ON true
			WHERE a.n <> d.attempt_count OR a.lo <> 1 OR a.hi <> d.attempt_count`, 0},
		{"deliveries without exactly one success, last", `
			SELECT count(*) FROM deliveries d
			WHERE (SELECT count(*) FROM attempts a WHERE a.delivery_id = d.id AND a.status = 'succeeded') <> 1
			   OR NOT EXISTS (SELECT 1 FROM attempts a WHERE a.delivery_id = d.id AND a.number = d.attempt_count AND a.status = 'succeeded')`, 0},
	}
	for _, c := range checks {
		var got int
		if err := db.QueryRow(ctx, c.query).Scan(&got); err != nil {
			f.t.Fatalf("%s: %v", c.what, err)
		}
		if got != c.want {
			f.t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}
	var s recordStats
	err = db.QueryRow(ctx, `SELECT count(*),
		count(*) FILTER (WHERE http_status IS NOT NULL OR error IN ('timeout', 'network_error')),
		count(*) FILTER (WHERE http_status IS NOT NULL) FROM attempts`).Scan(&s.attempts, &s.reached, &s.answered)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// describe is an event's deliveries as stored, for failure messages.
func (f *faultRun) describe(eventID string) string {
	ctx := context.Background()
	db, err := pgx.Connect(ctx, f.dbURL)
	if err != nil {
		return err.Error()
	}
	defer db.Close(ctx)
	rows, err := db.Query(ctx, `SELECT d.id, s.url, d.status, d.attempt_count, d.next_attempt_at, d.lease_until
		FROM deliveries d JOIN subscriptions s ON s.id = d.subscription_id WHERE d.event_id = $1`, eventID)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for rows.Next() {
		var id, url, status string
		var count int
		var next, lease *time.Time
		if err := rows.Scan(&id, &url, &status, &count, &next, &lease); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "\n  %s %s %s attempts=%d next=%v lease=%v", id, url, status, count, next, lease)
	}
	if b.Len() == 0 {
		return "none stored"
	}
	return b.String()
}

// checkLogs scans both processes' output for every credential the run
// used: API key, signing secrets, ingest token, master key.
func (f *faultRun) checkLogs() {
	secrets := map[string]string{"API key": f.key, "ingest token": e2eToken, "master key": e2eMasterKey}
	for _, s := range f.subs {
		secrets["signing secret of "+s.path] = s.secret
		secrets["signing key of "+s.path] = strings.TrimPrefix(s.secret, "whsec_")
	}
	for i, p := range append([]*process{f.api, f.worker}, f.others...) {
		logs := p.logs.String()
		for what, secret := range secrets {
			if strings.Contains(logs, secret) {
				f.t.Errorf("process %d (%s) logged the %s", i, p.cmd.Args[1], what)
			}
		}
	}
}

// fatalWithLogs fails t with reason, the processes' logs after it and the
// reason again at the end: a CI report that keeps only the last lines of
// the output still says what failed.
func fatalWithLogs(t testing.TB, reason, logs string) {
	t.Helper()
	t.Fatalf("%s\n%s\nFAILED: %s", reason, logs, reason)
}

// tail is the end of a process's output, for failure messages.
func tail(b *logBuffer) string {
	s := b.String()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

// TestStartsBeforeItsBackingServices: a webhookd started while Postgres and
// Redis are both down (a machine booting, a restart of everything) waits
// for them, not-ready meanwhile, and then works without a restart.
func TestStartsBeforeItsBackingServices(t *testing.T) {
	storetest.FullLane(t, "a fault test of the real binary")
	t.Parallel()
	pg := storetest.NewPostgres(t)
	e := newEngineOn(t, storetest.NewDatabaseOn(t, pg.AdminURL()))
	pg.Stop()
	e.redis.Stop()
	p := e.launch("serve", e.internal)
	// Waiting, it is alive and says it is not ready; a publisher is told
	// to retry, in the spec's error format.
	internal := "http://" + e.internal
	alive := func() bool {
		resp, err := http.Get(internal + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	waitFor(t, "/healthz to answer 200 while waiting for Postgres", 10*time.Second, alive)
	if status, body := e.call("GET", internal+"/readyz", "", nil); status != http.StatusServiceUnavailable || body["postgres"] != "unavailable" {
		t.Errorf("/readyz while waiting for Postgres: %d %v, want 503 with postgres unavailable", status, body)
	}
	if status, body := e.call("POST", internal+"/internal/v1/events", e2eToken, map[string]any{"merchant_id": "m_boot"}); status != http.StatusInternalServerError ||
		body["code"] != "upstream_error" || body["category"] != "api_error" {
		t.Errorf("publish while waiting for Postgres: %d %v, want 500 upstream_error", status, body)
	}
	if p.ready() {
		t.Fatal("webhookd reported ready with Postgres and Redis down")
	}
	pg.Start()
	e.redis.Start()
	p.waitReady(t, 30*time.Second) // the same process: it did not exit
	e.cmd, e.logs = p.cmd, p.logs

	key := e.keysCreate("m_boot")
	r := newReceiver(t)
	e.subscribe(key, r)
	r.wait(t, e.publish("m_boot"), 15*time.Second)
}
