package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// haDeployment is webhookd as deployed for high availability: two api
// processes and three worker processes on one Redis URL, all reaching
// Postgres through one PgBouncer in transaction mode.
type haDeployment struct {
	*faultRun
	apis, workers []*process
	// bouncer is the pooler between every process and Postgres; the
	// test's own checks read the database directly (faultRun.dbURL), so
	// that they do not depend on what the test restarts.
	bouncer *storetest.PgBouncer
}

// newHADeployment starts two api and three worker processes on redisURL
// and a fresh database behind a private PgBouncer (pool_mode =
// transaction, and the URL setting docs/postgres.md prescribes for it),
// with the fault tests' three subscriptions. The api processes apply the
// migrations through the pooler, as docs/postgres.md says they can.
func newHADeployment(t *testing.T, redisURL string, timeout time.Duration) *haDeployment {
	t.Helper()
	f := &faultRun{t: t, seen: map[string]*receipt{}, dbURL: storetest.NewDatabase(t)}
	bouncer := storetest.NewPgBouncer(t, f.dbURL)
	f.e = newEngineOn(t, bouncer.URL(), "WEBHOOKD_RETRY_SCHEDULE="+faultSchedule,
		"WEBHOOKD_DELIVERY_TIMEOUT="+timeout.String(), "WEBHOOKD_SWEEP_INTERVAL=1s",
		"WEBHOOKD_WORKER_CONCURRENCY=20",
		// The engine's private Redis stays unused: a later setting wins.
		"WEBHOOKD_REDIS_URL="+redisURL)
	d := &haDeployment{faultRun: f, bouncer: bouncer}
	d.apis = append(d.apis, f.e.spawn("api", f.e.internal))
	d.apis = append(d.apis, f.e.spawn("api", storetest.FreeAddr(t), "WEBHOOKD_LISTEN="+storetest.FreeAddr(t)))
	for range 3 {
		d.workers = append(d.workers, f.e.spawn("worker", storetest.FreeAddr(t)))
	}
	for _, p := range d.apis {
		f.ingest = append(f.ingest, p.internal)
	}
	// verify names the first api and worker in its messages and checks
	// every process's logs.
	f.api, f.worker = d.apis[0], d.workers[1]
	f.others = []*process{d.apis[1], d.workers[0], d.workers[2]}
	f.subscribe(acceptSoon, timeout)
	return d
}

// live are the processes not killed by the test.
func (d *haDeployment) live(killed *process) []*process {
	var out []*process
	for _, p := range append(append([]*process{}, d.apis...), d.workers...) {
		if p != killed {
			out = append(out, p)
		}
	}
	return out
}

// waitAllReady waits until every process in ps answers /readyz and returns
// how long that took.
func (d *haDeployment) waitAllReady(ps []*process, within time.Duration) time.Duration {
	d.t.Helper()
	start := time.Now()
	var notReady []string
	if !eventually(within, func() bool {
		notReady = notReady[:0]
		for _, p := range ps {
			if !p.ready() {
				notReady = append(notReady, p.cmd.Args[1]+" "+p.internal)
			}
		}
		return len(notReady) == 0
	}) {
		var logs strings.Builder
		for _, p := range ps {
			fmt.Fprintf(&logs, "\n%s %s logs:\n%s", p.cmd.Args[1], p.internal, tail(p.logs))
		}
		fatalWithLogs(d.t, fmt.Sprintf("not ready %s after the fault without a restart: %v", within, notReady), logs.String())
	}
	return time.Since(start)
}

// waitAllNotReady waits, while a backing service is down, until every
// process in ps has answered /readyz not-ready at least once.
func (d *haDeployment) waitAllNotReady(ps []*process, within time.Duration) {
	d.t.Helper()
	seen := map[*process]bool{}
	if !eventually(within, func() bool {
		for _, p := range ps {
			seen[p] = seen[p] || !p.ready()
		}
		return !slices.ContainsFunc(ps, func(p *process) bool { return !seen[p] })
	}) {
		for _, p := range ps {
			if !seen[p] {
				d.t.Errorf("%s %s never reported not-ready while the service was down", p.cmd.Args[1], p.internal)
			}
		}
		d.t.FailNow()
	}
}

// sweeperRequeued sums webhookd_sweeper_requeued_total over the live
// worker processes.
func (d *haDeployment) sweeperRequeued() float64 {
	var sum float64
	for _, p := range d.workers {
		if !p.ready() {
			continue
		}
		_, series := scrape(d.t, "http://"+p.internal+"/metrics")
		sum += series["webhookd_sweeper_requeued_total"]
	}
	return sum
}

// watchReadiness polls the processes' /readyz until stop is closed, then
// sends the set of those that answered not-ready at least once.
func (d *haDeployment) watchReadiness(ps []*process, stop <-chan struct{}) <-chan map[*process]bool {
	out := make(chan map[*process]bool, 1)
	go func() {
		seen := map[*process]bool{}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, p := range ps {
				if !p.ready() {
					seen[p] = true
				}
			}
			select {
			case <-stop:
				out <- seen
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// publisherCounts is a snapshot of the publisher's counters.
type publisherCounts struct {
	// published is every event the publisher started on, accepted those
	// the engine took, retried those that had to be sent again.
	published, accepted, retried int
}

// publishing reads the publisher's counters.
func (d *haDeployment) publishing() publisherCounts {
	d.mu.Lock()
	defer d.mu.Unlock()
	return publisherCounts{published: d.published, accepted: len(d.accepted), retried: d.retried}
}

// waitDeliveryAfter waits until an event the engine accepted after its
// first n has reached a subscription: the proof that events are stored
// and delivered again, not only that attempts already under way went on.
func (d *haDeployment) waitDeliveryAfter(n int, within time.Duration) {
	d.t.Helper()
	if !eventually(within, func() bool { return d.deliveredAfter(n) }) {
		fatalWithLogs(d.t, fmt.Sprintf("no event accepted after the first %d reached a subscription within %s", n, within),
			"api logs:\n"+tail(d.api.logs)+"\nworker logs:\n"+tail(d.worker.logs))
	}
}

// deliveredAfter reports whether a receiver took an event accepted after
// the first n.
func (d *haDeployment) deliveredAfter(n int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ev := range d.accepted[min(n, len(d.accepted)):] {
		for _, s := range d.subs {
			if r := d.seen[s.path+" "+ev.id]; r != nil && r.accepted > 0 {
				return true
			}
		}
	}
	return false
}

// report logs the delivery summary line of a run.
func (d *haDeployment) report(name string, v verification, took time.Duration) {
	retried := d.publishing().retried
	d.t.Logf("REPORT %s: published %d events through %d api processes (%d deliveries, %d publishes retried); delivered %d/%d;"+
		" attempts %d; receiver requests %d (%d cut off); duplicates %d (%.2f%%); all delivered %s after the first publish",
		name, v.events, len(d.apis), v.deliveries, retried, v.deliveries, v.deliveries, v.attempts, v.requests, v.interrupted,
		v.duplicates, 100*float64(v.duplicates)/float64(v.deliveries), took.Round(time.Millisecond))
}

// stopAndVerify ends the publishing started at start (closes stop, waits
// for done), requires every event to have been accepted, verifies the
// deliveries (interruptible as verify takes it) and reports the run.
func (d *haDeployment) stopAndVerify(name string, start time.Time, interruptible bool, stop chan<- struct{}, done <-chan struct{}) {
	d.t.Helper()
	close(stop)
	<-done
	if p := d.publishing(); p.accepted != p.published {
		d.t.Errorf("%d of %d events were accepted; the publisher retries each for a minute", p.accepted, p.published)
	}
	v := d.verify(90*time.Second, interruptible)
	d.report(name, v, time.Since(start)-v.checking)
}

// TestRedisHighAvailability runs the deployment of two api and three worker
// processes on Redis with Sentinel (a master, a replica, three Sentinels)
// and Postgres behind PgBouncer in transaction mode, while events are
// published steadily through both api processes: one worker is killed,
// then the Redis master, and Sentinel promotes the replica, then PgBouncer
// is killed and started again on the same port. Every accepted event must
// still reach every matching subscription, no attempt number be recorded
// twice, and every live process be ready again without a restart. Then
// the same run, without faults, on a Redis Cluster of three masters; then
// on a Cluster of three masters with a replica each, whose master holding
// the schedule is killed: deliveries must resume within 10 s of the
// replica's promotion.
//
// Redis replicates asynchronously: what the master took in its last
// moments may be missing on the replica, tasks included. Postgres is the
// record: the sweeper enqueues again every delivery overdue there, which
// is what this test holds the engine to.
func TestRedisHighAvailability(t *testing.T) {
	storetest.FullLane(t, "Redis Sentinel and Cluster behind PgBouncer, on the real binary")
	const (
		events  = 300
		gap     = 20 * time.Millisecond
		timeout = time.Second
	)
	t.Run("sentinel", func(t *testing.T) {
		sentinel := storetest.NewSentinel(t)
		d := newHADeployment(t, sentinel.URL(), timeout)

		// Events are published until a second's worth (50) more are
		// accepted after the last fault is over, so that every fault
		// strikes while events come in, whatever each took, and the
		// engine is seen taking them in after it.
		const aSecondsWorth = int(time.Second / gap)
		underWay := func() { d.waitUnderWay(d.publishing().accepted+aSecondsWorth, 60*time.Second) }
		stop, done := make(chan struct{}), make(chan struct{})
		start := time.Now()
		go d.publishEvents(-1, gap, stop, done)

		underWay()
		killed := d.workers[0]
		struck := time.Now()
		killed.kill()
		ready := d.waitAllReady(d.live(killed), 30*time.Second)
		t.Logf("REPORT sentinel worker SIGKILL: 1 of 3 workers killed %s into publishing, not restarted; the 4 other processes ready %s after",
			struck.Sub(start).Round(time.Millisecond), ready.Round(time.Millisecond))

		underWay()
		before := d.publishing()
		struck = time.Now()
		watched := make(chan struct{})
		notReady := d.watchReadiness(d.live(killed), watched)
		failover := sentinel.KillMaster()
		ready = d.waitAllReady(d.live(killed), 60*time.Second)
		close(watched)
		t.Logf("REPORT sentinel master SIGKILL: killed %s into publishing; replica promoted %s after; %d of %d live processes reported not-ready meanwhile;"+
			" every live process ready %s after the promotion without a restart; %d publishes retried meanwhile",
			struck.Sub(start).Round(time.Millisecond), failover.Round(time.Millisecond), len(<-notReady), len(d.live(killed)),
			ready.Round(time.Millisecond), d.publishing().retried-before.retried)

		// PgBouncer dies, as a crash would, cutting every connection of
		// every process, and comes back on the same port: each process's
		// pool must drop its dead connections and open new ones.
		// The fault lasts until every process's readiness check has met it.
		underWay()
		before = d.publishing()
		struck = time.Now()
		d.bouncer.Stop()
		d.waitAllNotReady(d.live(killed), 30*time.Second)
		d.bouncer.Start()
		back, acceptedBack := time.Now(), d.publishing().accepted
		ready = d.waitAllReady(d.live(killed), 60*time.Second)
		d.waitDeliveryAfter(acceptedBack, 60*time.Second)
		resumed := time.Since(back)
		t.Logf("REPORT sentinel PgBouncer restart: killed %s into publishing, started again on the same port %s later,"+
			" when each of the %d live processes had reported not-ready; every live process ready %s after PgBouncer was back without a restart;"+
			" the first event accepted after it delivered %s after it was back; %d publishes retried meanwhile",
			struck.Sub(start).Round(time.Millisecond), back.Sub(struck).Round(time.Millisecond), len(d.live(killed)),
			ready.Round(time.Millisecond), resumed.Round(time.Millisecond), d.publishing().retried-before.retried)

		underWay()
		d.stopAndVerify("sentinel (worker, Redis master and PgBouncer killed)", start, true, stop, done)
		// The processes worked on the Sentinels' Redis, not on another.
		promoted := sentinel.Replica.Client()
		defer promoted.Close()
		if n, err := promoted.Exists(context.Background(), "asynq:queues").Result(); err != nil || n != 1 {
			t.Errorf("the promoted replica has no asynq queues (%d, %v)", n, err)
		}
		t.Logf("sweeper re-enqueued %v deliveries", d.sweeperRequeued())
	})
	t.Run("cluster", func(t *testing.T) {
		cluster := storetest.NewCluster(t)
		d := newHADeployment(t, cluster.URL(), timeout)
		done := make(chan struct{})
		start := time.Now()
		go d.publishEvents(events, gap, nil, done)
		<-done
		if len(d.accepted) != events {
			t.Errorf("%d of %d events were accepted", len(d.accepted), events)
		}
		v := d.verify(60*time.Second, false)
		d.report("cluster (3 masters, no fault)", v, time.Since(start)-v.checking)
		logKeysPerNode(t, cluster)
		// The queue metrics (asynq's per-queue scripts) work on Cluster.
		_, series := scrape(t, "http://"+d.workers[0].internal+"/metrics")
		for _, queue := range []string{"deliveries", "ingest", "maintenance"} {
			name := `asynq_queue_memory_usage_approx_bytes{queue="` + queue + `"}`
			if _, ok := series[name]; !ok {
				t.Errorf("a worker on Cluster does not export %s", name)
			}
		}
	})
	t.Run("cluster failover", func(t *testing.T) {
		cluster := storetest.NewReplicatedCluster(t)
		d := newHADeployment(t, cluster.URL(), timeout)
		const aSecondsWorth = int(time.Second / gap)
		stop, done := make(chan struct{}), make(chan struct{})
		start := time.Now()
		go d.publishEvents(-1, gap, stop, done)
		d.waitUnderWay(aSecondsWorth, 60*time.Second)

		// The master holding the schedule's keys dies: every attempt
		// passes through the schedule, from the api processes that park
		// it to the workers that take it. The schedule's round-robin
		// counter lives in each part of it that work was pushed to, here
		// the one merchant's alone (whether the schedule is sharded over
		// hash tags or kept under one).
		ctx := context.Background()
		var master *storetest.Node
		if !eventually(30*time.Second, func() bool {
			var err error
			master, err = cluster.MasterHolding(ctx, "*webhookd:lanes*:tick")
			return err == nil && master != nil
		}) {
			t.Fatal("no Cluster master holds the schedule's keys")
		}
		struck := time.Now()
		promoted := cluster.KillMaster(master)
		acceptedBefore := d.publishing().accepted
		d.waitDeliveryAfter(acceptedBefore, 60*time.Second)
		resumed := time.Since(promoted)
		t.Logf("REPORT cluster master SIGKILL: the schedule's master killed %s into publishing; replica promoted %s after;"+
			" the first event accepted after the promotion delivered %s after it",
			struck.Sub(start).Round(time.Millisecond), promoted.Sub(struck).Round(time.Millisecond), resumed.Round(time.Millisecond))
		if resumed > 10*time.Second {
			t.Errorf("deliveries resumed %s after the promotion, want within 10s", resumed.Round(time.Millisecond))
		}

		d.waitUnderWay(d.publishing().accepted+aSecondsWorth, 60*time.Second)
		d.stopAndVerify("cluster (3 masters with replicas, the schedule's master killed)", start, false, stop, done)
	})
}

// logKeysPerNode logs how many keys each master of the Cluster holds:
// asynq keeps each queue on one node (its name is a hash tag), webhookd's
// own keys spread over all.
func logKeysPerNode(t *testing.T, c *storetest.Cluster) {
	t.Helper()
	ctx := context.Background()
	for _, n := range c.Nodes {
		rc := n.Client()
		size, err := rc.DBSize(ctx).Result()
		_ = rc.Close()
		if err != nil {
			t.Errorf("cluster node %s: %v", n.Addr, err)
		}
		t.Logf("cluster node %s holds %d keys", n.Addr, size)
	}
}
