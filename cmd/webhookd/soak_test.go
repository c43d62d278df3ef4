//go:build soak

package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestSoak is the soak (scripts/soak runs it; CI does not): mixed traffic
// for WEBHOOKD_SOAK_DURATION (default 1h) with a fault every
// WEBHOOKD_SOAK_FAULT_EVERY (default 4m), then the fault tests' invariants
// over everything published, and flat memory: the long-lived processes'
// RSS and Redis's used memory in the last quarter of the run against the
// second (the first is warm-up).
func TestSoak(t *testing.T) {
	storetest.FullLane(t, "the soak")
	duration := soakDuration(t, "WEBHOOKD_SOAK_DURATION", time.Hour)
	every := soakDuration(t, "WEBHOOKD_SOAK_FAULT_EVERY", 4*time.Minute)
	const (
		timeout = time.Second
		// publishGap paces the publisher: 40 events a second.
		publishGap = 25 * time.Millisecond
	)
	// Mostly healthy receivers.
	f := newFaultRun(t, true, receiverMix{reset: 0.05, fail: 0.05, slow: 0.05, late: 0.02}.answer, timeout)
	// A second worker takes the SIGKILLs, so that the first worker and the
	// api process live through the whole run and their memory can be
	// watched.
	victim := f.e.spawn("worker", storetest.FreeAddr(t))
	f.others = append(f.others, victim)
	rc := redis.NewClient(mustRedisOptions(t, f.e.redis.URL()))
	defer rc.Close()

	faults := []struct {
		name   string
		strike func()
	}{
		{"worker SIGKILL", func() {
			victim.kill()
			// The fault: without this worker while a second's worth of
			// events is accepted.
			f.waitUnderWay(f.acceptedCount()+int(time.Second/publishGap), time.Minute)
			victim = f.e.spawn("worker", victim.internal)
			f.others = append(f.others, victim)
		}},
		{"Redis restart", func() {
			f.e.redis.Stop()
			f.waitOutageSeen()
			f.e.redis.Start()
		}},
		{"Postgres restart", func() {
			f.pg.Stop()
			f.waitOutageSeen()
			f.pg.Start()
		}},
		{"Redis FLUSHALL", func() {
			if err := rc.FlushAll(context.Background()).Err(); err != nil {
				t.Errorf("FLUSHALL: %v", err)
			}
		}},
	}

	out := os.Getenv("WEBHOOKD_SOAK_OUT")
	if out == "" {
		out = t.TempDir() + "/soak.csv"
	}
	csv, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer csv.Close()
	fmt.Fprintln(csv, "elapsed_s,accepted,api_rss_kib,worker_rss_kib,redis_used_bytes,event")

	stop := make(chan struct{})
	published := make(chan struct{})
	go f.publishEvents(-1, publishGap, stop, published)
	readersDone := make(chan struct{})
	go f.readAPI(stop, readersDone)

	type sample struct {
		at                 time.Duration
		api, worker, redis int64
	}
	var samples []sample
	start := time.Now()
	nextFault := start.Add(every)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for i := 0; time.Since(start) < duration; {
		<-tick.C
		event := ""
		if time.Now().After(nextFault) {
			ft := faults[i%len(faults)]
			i++
			struck := time.Now()
			ft.strike()
			restored := time.Now()
			ready := f.waitReady(2 * time.Minute)
			event = fmt.Sprintf("%s (lasted %s; ready %s after)", ft.name, restored.Sub(struck).Round(time.Millisecond), ready.Round(time.Millisecond))
			t.Logf("%6.0fs fault: %s", time.Since(start).Seconds(), event)
			nextFault = time.Now().Add(every)
		}
		s := sample{at: time.Since(start), api: rssKiB(f.api), worker: rssKiB(f.worker)}
		if info, err := rc.Info(context.Background(), "memory").Result(); err == nil {
			s.redis = infoField(info, "used_memory")
		}
		samples = append(samples, s)
		f.mu.Lock()
		n := len(f.accepted)
		f.mu.Unlock()
		fmt.Fprintf(csv, "%.0f,%d,%d,%d,%d,%q\n", s.at.Seconds(), n, s.api, s.worker, s.redis, event)
	}
	close(stop)
	<-published
	<-readersDone

	v := f.verify(10*time.Minute, true)
	t.Logf("REPORT soak %s: published %d events (%d deliveries); delivered %d/%d; attempts %d; receiver requests %d (%d cut off by faults); duplicates %d (%.2f%%)",
		duration, v.events, v.deliveries, v.deliveries, v.deliveries, v.attempts, v.requests, v.interrupted,
		v.duplicates, 100*float64(v.duplicates)/float64(max(v.deliveries, 1)))

	// Flat memory: the last quarter against the second.
	quarter := func(q int, get func(sample) int64) []int64 {
		var vs []int64
		for _, s := range samples {
			if int(4*s.at/duration) == q {
				vs = append(vs, get(s))
			}
		}
		slices.Sort(vs)
		return vs
	}
	for _, m := range []struct {
		name  string
		get   func(sample) int64
		slack int64 // absolute growth tolerated, in the metric's unit
	}{
		{"api RSS (KiB)", func(s sample) int64 { return s.api }, 16 << 10},
		{"worker RSS (KiB)", func(s sample) int64 { return s.worker }, 16 << 10},
		// Redis restarts and flushes empty it; its peak is what must not
		// climb.
		{"Redis used memory (bytes)", func(s sample) int64 { return s.redis }, 4 << 20},
	} {
		second, last := quarter(1, m.get), quarter(3, m.get)
		if len(second) == 0 || len(last) == 0 {
			t.Errorf("%s: too few samples", m.name)
			continue
		}
		peak2, peak4 := second[len(second)-1], last[len(last)-1]
		med2, med4 := second[len(second)/2], last[len(last)/2]
		t.Logf("REPORT %s: second quarter median %d peak %d; last quarter median %d peak %d", m.name, med2, peak2, med4, peak4)
		if peak4 > peak2+peak2/4+m.slack {
			t.Errorf("%s grows: last quarter peak %d against %d in the second", m.name, peak4, peak2)
		}
	}
	t.Logf("samples written to %s", out)
}

// readAPI is the merchants' side of the traffic: it pages through events
// and deliveries and reads single ones, a few times a second, until stop.
func (f *faultRun) readAPI(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	base := "http://" + f.e.public + "/v1/"
	for {
		select {
		case <-stop:
			return
		case <-time.After(300 * time.Millisecond):
		}
		for _, list := range []string{"events?limit=100", "webhook_deliveries?limit=100&status=pending", "webhook_subscriptions"} {
			req, _ := http.NewRequest("GET", base+list, nil)
			req.Header.Set("Authorization", "Bearer "+f.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue // the api process may be restarting
			}
			resp.Body.Close()
			if resp.StatusCode != 200 && resp.StatusCode != 503 && resp.StatusCode != 500 {
				f.t.Errorf("GET %s: %d", list, resp.StatusCode)
			}
		}
	}
}

func soakDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

func mustRedisOptions(t *testing.T, url string) *redis.Options {
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// rssKiB is a process's resident set size from /proc.
func rssKiB(p *process) int64 {
	fh, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// infoField reads one integer field of a Redis INFO answer.
func infoField(info, name string) int64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
