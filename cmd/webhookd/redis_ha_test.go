package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/store/storetest"
)

// haDatabaseURL is the database URL every process of the highly available
// deployment tests gets: one place to route it through a connection pooler.
func haDatabaseURL(t *testing.T) string {
	t.Helper()
	return storetest.NewDatabase(t)
}

// haDeployment is webhookd as deployed for high availability: two api
// processes and three worker processes on one Redis URL.
type haDeployment struct {
	*faultRun
	apis, workers []*process
}

// newHADeployment starts two api and three worker processes on redisURL
// and a fresh database, with the fault tests' three subscriptions.
func newHADeployment(t *testing.T, redisURL string, timeout time.Duration) *haDeployment {
	t.Helper()
	f := &faultRun{t: t, seen: map[string]*receipt{}, dbURL: haDatabaseURL(t)}
	f.e = newEngineOn(t, f.dbURL, "WEBHOOKD_RETRY_SCHEDULE="+faultSchedule,
		"WEBHOOKD_DELIVERY_TIMEOUT="+timeout.String(), "WEBHOOKD_SWEEP_INTERVAL=1s",
		"WEBHOOKD_WORKER_CONCURRENCY=20",
		// The engine's private Redis stays unused: a later setting wins.
		"WEBHOOKD_REDIS_URL="+redisURL)
	d := &haDeployment{faultRun: f}
	d.apis = append(d.apis, f.e.spawn("api", f.e.internal))
	d.apis = append(d.apis, f.e.spawn("api", freeAddr(t), "WEBHOOKD_LISTEN="+freeAddr(t)))
	for range 3 {
		d.workers = append(d.workers, f.e.spawn("worker", freeAddr(t)))
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
	for {
		var notReady []string
		for _, p := range ps {
			if !p.ready() {
				notReady = append(notReady, p.cmd.Args[1]+" "+p.internal)
			}
		}
		if len(notReady) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > within {
			var logs strings.Builder
			for _, p := range ps {
				fmt.Fprintf(&logs, "\n%s %s logs:\n%s", p.cmd.Args[1], p.internal, tail(p.logs))
			}
			d.t.Fatalf("not ready %s after the fault without a restart: %v%s", within, notReady, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
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

// report logs the delivery summary line of a run.
func (d *haDeployment) report(name string, v verification, took time.Duration) {
	d.mu.Lock()
	retried := d.retried
	d.mu.Unlock()
	d.t.Logf("REPORT %s: published %d events through %d api processes (%d deliveries, %d publishes retried); delivered %d/%d;"+
		" attempts %d; receiver requests %d (%d cut off); duplicates %d (%.2f%%); all delivered %s after the first publish",
		name, v.events, len(d.apis), v.deliveries, retried, v.deliveries, v.deliveries, v.attempts, v.requests, v.interrupted,
		v.duplicates, 100*float64(v.duplicates)/float64(v.deliveries), took.Round(time.Millisecond))
}

// TestRedisHighAvailability runs the deployment of two api and three worker
// processes on Redis with Sentinel (a master, a replica, three Sentinels)
// while events are published steadily through both api processes: one
// worker is killed, then the Redis master, and Sentinel promotes the
// replica. Every accepted event must still reach every matching
// subscription, no attempt number be recorded twice, and every live
// process be ready again without a restart. Then the same run, without
// faults, on a Redis Cluster of three masters.
//
// Redis replicates asynchronously: what the master took in its last
// moments may be missing on the replica, tasks included. Postgres is the
// record: the sweeper enqueues again every delivery overdue there, which
// is what this test holds the engine to.
func TestRedisHighAvailability(t *testing.T) {
	const (
		events  = 300
		gap     = 20 * time.Millisecond
		timeout = time.Second
	)
	t.Run("sentinel", func(t *testing.T) {
		sentinel := storetest.NewSentinel(t)
		d := newHADeployment(t, sentinel.URL(), timeout)

		done := make(chan struct{})
		start := time.Now()
		go d.publishEvents(events, gap, nil, done)

		time.Sleep(time.Second)
		killed := d.workers[0]
		struck := time.Now()
		killed.kill()
		ready := d.waitAllReady(d.live(killed), 30*time.Second)
		t.Logf("REPORT sentinel worker SIGKILL: 1 of 3 workers killed %s into publishing, not restarted; the 4 other processes ready %s after",
			struck.Sub(start).Round(time.Millisecond), ready.Round(time.Millisecond))

		time.Sleep(time.Second)
		d.mu.Lock()
		retriedBefore := d.retried
		d.mu.Unlock()
		struck = time.Now()
		watched := make(chan struct{})
		notReady := d.watchReadiness(d.live(killed), watched)
		failover := sentinel.KillMaster()
		ready = d.waitAllReady(d.live(killed), 60*time.Second)
		close(watched)
		d.mu.Lock()
		retried := d.retried - retriedBefore
		d.mu.Unlock()
		t.Logf("REPORT sentinel master SIGKILL: killed %s into publishing; replica promoted %s after; %d of %d live processes reported not-ready meanwhile;"+
			" every live process ready %s after the promotion without a restart; %d publishes retried meanwhile",
			struck.Sub(start).Round(time.Millisecond), failover.Round(time.Millisecond), len(<-notReady), len(d.live(killed)),
			ready.Round(time.Millisecond), retried)

		<-done
		if len(d.accepted) != events {
			t.Errorf("%d of %d events were accepted; the publisher retries each for a minute", len(d.accepted), events)
		}
		v := d.verify(90*time.Second, true)
		d.report("sentinel (worker and master killed)", v, time.Since(start)-v.checking)
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
