package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// schedulerProbe runs a scheduler whose attempts call attempt, and counts
// what runs at once.
type schedulerProbe struct {
	t     *testing.T
	lanes *queue.Lanes
	s     *Scheduler
	mu    sync.Mutex
	now   map[string]int // running, by merchant
	most  map[string]int // most running at once, by merchant
	ended map[string]int // attempts ended, by merchant
	// started are the attempts started, by id.
	started map[string]bool
	// release ends, by merchant, the attempts of the merchants that hang,
	// one per value: true ends it as a timeout.
	release map[string]chan bool
	// leases are the publish's leases the attempts started on, by id.
	leases map[string]*store.LeasedDelivery
	// redis is the probe's Redis.
	redis *redis.Client
	// metrics are the scheduler's series, registered nowhere.
	metrics *metrics.Set
}

func newSchedulerProbe(t *testing.T, cfg SchedulerConfig, hangs ...string) *schedulerProbe {
	t.Helper()
	return newHookedSchedulerProbe(t, cfg, nil, hangs...)
}

// newHookedSchedulerProbe is newSchedulerProbe with hooks in its scheduler.
func newHookedSchedulerProbe(t *testing.T, cfg SchedulerConfig, hooks *schedulerHooks, hangs ...string) *schedulerProbe {
	t.Helper()
	rd := storetest.NewRedis(t)
	rc := redis.NewClient(&redis.Options{Network: "unix", Addr: rd.Socket})
	t.Cleanup(func() { _ = rc.Close() })
	p := &schedulerProbe{t: t, lanes: queue.NewLanes(rc, 0), now: map[string]int{}, most: map[string]int{}, ended: map[string]int{},
		started: map[string]bool{}, leases: map[string]*store.LeasedDelivery{},
		release: map[string]chan bool{}, redis: rc}
	hanging := map[string]bool{}
	for _, m := range hangs {
		hanging[m] = true
		p.release[m] = make(chan bool)
	}
	attempt := func(ctx context.Context, it queue.LaneItem, held *heldSlots) {
		m := it.Task.MerchantID
		if m == "panics" {
			panic("an attempt that panics")
		}
		p.mu.Lock()
		p.started[it.ID] = true
		p.leases[it.ID] = it.Task.Leased
		p.now[m]++
		p.most[m] = max(p.most[m], p.now[m])
		p.mu.Unlock()
		timedOut := false
		if hanging[m] {
			select {
			case timedOut = <-p.release[m]:
			case <-ctx.Done():
			}
		}
		held.exchanged(timedOut)
		p.mu.Lock()
		p.now[m]--
		p.ended[m]++
		p.mu.Unlock()
	}
	set, err := metrics.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewScheduler(cfg, SchedulerDeps{Lanes: p.lanes, Redis: rc, Attempt: attempt, Clock: clock.System{},
		Logger: slog.New(slog.DiscardHandler), Metrics: set})
	if err != nil {
		t.Fatal(err)
	}
	p.metrics = set
	s.hooks, p.s = hooks, s
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() {
		for _, c := range p.release {
			close(c)
		}
		cancel()
		<-done
	})
	return p
}

// push parks n attempts of merchant m, due now, spread over subs
// subscriptions.
func (p *schedulerProbe) push(m string, n, subs int) {
	p.t.Helper()
	if _, err := p.lanes.Push(context.Background(), attemptsOf(m, n, subs)...); err != nil {
		p.t.Fatal(err)
	}
}

// attemptsOf is n first attempts of merchant m, due now, spread over subs
// subscriptions of their own.
func attemptsOf(m string, n, subs int) []queue.LaneItem {
	ids := make([]uuid.UUID, subs)
	for i := range ids {
		ids[i] = uuid.New()
	}
	items := make([]queue.LaneItem, n)
	for i := range items {
		items[i] = queue.LaneItem{ID: fmt.Sprintf("%s-%s", m, uuid.NewString()), Task: queue.Attempt{DeliveryID: uuid.New(),
			SubscriptionID: ids[i%subs], MerchantID: m, Number: 1, Trigger: store.TriggerScheduled, Due: time.Now()}}
	}
	return items
}

// startedOne reports whether it was started.
func (p *schedulerProbe) startedOne(it queue.LaneItem) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started[it.ID]
}

// parked reports whether the schedule holds it parked (not taken).
func (p *schedulerProbe) parked(it queue.LaneItem) bool {
	p.t.Helper()
	held, err := p.lanes.Held(context.Background(), []queue.LaneItem{it}, time.Now().Add(time.Hour))
	if err != nil {
		p.t.Fatal(err)
	}
	return held[0]
}

// waitFor waits until cond holds of the counts, or fails after 10 s.
func (p *schedulerProbe) waitFor(what string, cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		ok := cond()
		p.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.t.Fatalf("waiting for %s: running %v, most %v, ended %v", what, p.now, p.most, p.ended)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// probeConfig is a small pool whose idle check never comes in a test:
// every take must be woken by a push, a freed slot or a due time.
var probeConfig = SchedulerConfig{Concurrency: 8, Share: 2, SubscriptionCap: 2, CircuitAfter: 3, Reserve: 1,
	AttemptTimeout: time.Minute, Held: time.Second, IdleCheck: time.Hour}

// TestSchedulerKeepsTheReserveForOthers: a merchant whose attempts all
// hang is lent every slot but the reserve, never more; another merchant's
// work then runs in the reserve, all of it, while the hanging attempts
// still hang.
func TestSchedulerKeepsTheReserveForOthers(t *testing.T) {
	t.Parallel()
	p := newSchedulerProbe(t, probeConfig, "hostile")
	p.push("hostile", 100, 50)
	p.waitFor("the hostile merchant to fill all but the reserve", func() bool { return p.now["hostile"] == 7 })
	p.push("calm", 20, 1)
	p.waitFor("every attempt of the calm merchant", func() bool { return p.ended["calm"] == 20 })
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.most["hostile"] > 7 || p.ended["hostile"] > 0 {
		t.Errorf("the hostile merchant ran %d at once, %d ended; want 7 at most, none ended", p.most["hostile"], p.ended["hostile"])
	}
}

// TestSchedulerLendsTheShareBack: while another merchant has due work, a
// merchant running beyond its share gets no new slot; the slots its
// attempts free go to the other merchant first.
func TestSchedulerLendsTheShareBack(t *testing.T) {
	t.Parallel()
	p := newSchedulerProbe(t, probeConfig, "hostile", "second")
	p.push("hostile", 100, 50)
	p.waitFor("the hostile merchant to fill all but the reserve", func() bool { return p.now["hostile"] == 7 })
	// A second hanging merchant takes the reserve, then its share as the
	// first merchant's attempts end, and no more while it waits.
	p.push("second", 10, 10)
	p.waitFor("the second merchant in the reserve", func() bool { return p.now["second"] == 1 })
	p.release["hostile"] <- true // one hostile attempt ends
	p.waitFor("the second merchant at its share", func() bool { return p.now["second"] == 2 })
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.now["hostile"] != 6 {
		t.Errorf("the hostile merchant runs %d, want 6: the freed slot went to it", p.now["hostile"])
	}
}

// TestSchedulerCircuit: a subscription whose attempts keep timing out is
// held to one attempt at a time once CircuitAfter of them in a row did,
// and gets its cap back when an attempt ends without timing out.
func TestSchedulerCircuit(t *testing.T) {
	t.Parallel()
	cfg := SchedulerConfig{Concurrency: 8, Share: 8, SubscriptionCap: 4, CircuitAfter: 3, AttemptTimeout: time.Minute, Held: time.Second,
		IdleCheck: time.Hour}
	p := newSchedulerProbe(t, cfg, "A")
	p.push("A", 30, 1)
	started := func() int { return p.now["A"] + p.ended["A"] }
	p.waitFor("the subscription at its cap", func() bool { return p.now["A"] == 4 })
	for i := range 2 { // two timeouts: the cap still holds, the slots refill
		p.release["A"] <- true
		p.waitFor("the slot refilled", func() bool { return p.ended["A"] == i+1 && p.now["A"] == 4 })
	}
	p.release["A"] <- true // the third in a row: the circuit opens
	p.waitFor("the third to end", func() bool { return p.ended["A"] == 3 && p.now["A"] == 3 })
	for i := range 3 { // the three still running end; one may start then
		p.release["A"] <- true
		p.waitFor("an attempt to end", func() bool { return p.ended["A"] == 4+i })
	}
	p.waitFor("one attempt through the open circuit", func() bool { return p.now["A"] == 1 })
	p.mu.Lock()
	if n := started(); n != 7 {
		t.Errorf("%d attempts started, want 7: none beside the open circuit's one", n)
	}
	p.mu.Unlock()
	p.release["A"] <- false // it ends without a timeout: the circuit closes
	p.waitFor("the cap back", func() bool { return p.now["A"] == 4 })
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := started(); n != 11 {
		t.Errorf("%d attempts started in all, want 11", n)
	}
}

// TestSchedulerWorkPushedToAFullPool: work pushed while every slot is busy
// starts when a slot frees, not at the next idle check (an hour here).
func TestSchedulerWorkPushedToAFullPool(t *testing.T) {
	t.Parallel()
	cfg := probeConfig
	cfg.Concurrency, cfg.Share, cfg.Reserve = 2, 2, 0
	p := newSchedulerProbe(t, cfg, "busy")
	p.push("busy", 2, 2)
	p.waitFor("the pool full", func() bool { return p.now["busy"] == 2 })
	p.push("calm", 3, 1)
	p.release["busy"] <- false
	p.waitFor("the calm merchant's work in the freed slot", func() bool { return p.ended["calm"] == 3 })
}

// TestSchedulerSurvivesAPanickingAttempt: an attempt that panics gives its
// slots back and takes nothing else down: the pool goes on with the rest.
func TestSchedulerSurvivesAPanickingAttempt(t *testing.T) {
	t.Parallel()
	cfg := probeConfig
	cfg.Concurrency, cfg.Share, cfg.Reserve = 2, 2, 0
	p := newSchedulerProbe(t, cfg)
	p.push("panics", 5, 1)
	p.push("calm", 5, 1)
	p.waitFor("the calm merchant's work beside the panics", func() bool { return p.ended["calm"] == 5 })
}

// takeGate holds the scheduler's Run before its next take, once armed:
// a test then acts while Run has counted the free slots and not yet taken.
type takeGate struct {
	armed   chan struct{}
	holding chan struct{}
	resume  chan struct{}
}

func newTakeGate() *takeGate {
	return &takeGate{armed: make(chan struct{}, 1), holding: make(chan struct{}), resume: make(chan struct{})}
}

func (g *takeGate) hooks() *schedulerHooks {
	return &schedulerHooks{beforeTake: func() {
		select {
		case <-g.armed:
			g.holding <- struct{}{}
			<-g.resume
		default:
		}
	}}
}

// TestSchedulerStartDuringATake: a first attempt offered while Run takes
// from the schedule (after it counted the free slots, before the items
// taken hold theirs) is refused, and its publisher parks it: it never
// takes a slot the take counted free, so the two together never lend a
// merchant the reserve. From the schedule it runs as any parked attempt:
// at once where the slots left allow, else when they do.
func TestSchedulerStartDuringATake(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// parked is the merchants with work due before the take (100
		// attempts over 50 subscriptions each); the hostile merchant's
		// attempts hang.
		parked []string
		// start is the merchant of the attempt offered; a calm one's
		// attempts end at once.
		start    string
		wantRuns bool
	}{
		{name: "nothing due: it runs from the schedule", start: "calm", wantRuns: true},
		{name: "the take lends all but the reserve: another merchant runs in it", parked: []string{"hostile"}, start: "calm", wantRuns: true},
		{name: "the take lends all but the reserve: the lent merchant's attempt waits", parked: []string{"hostile"}, start: "hostile"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gate := newTakeGate()
			p := newHookedSchedulerProbe(t, probeConfig, gate.hooks(), "hostile")
			gate.armed <- struct{}{}
			for _, m := range tc.parked {
				p.push(m, 100, 50)
			}
			signal(p.s.wake) // a take after the push, whenever Run last looked
			<-gate.holding   // Run has counted 8 free slots and not taken yet
			it := attemptsOf(tc.start, 1, 1)[0]
			if p.s.Start(it) {
				t.Error("Start took an attempt while Run was taking")
			} else if _, err := p.lanes.Push(context.Background(), it); err != nil { // as its publisher does
				t.Fatal(err)
			}
			close(gate.resume)
			if len(tc.parked) > 0 {
				p.waitFor("the take to lend all but the reserve", func() bool {
					return p.now["hostile"] >= probeConfig.Concurrency-probeConfig.Reserve
				})
			}
			if tc.wantRuns {
				p.waitFor("the offered attempt", func() bool { return p.ended[tc.start] == 1 })
			} else if !p.parked(it) && !p.startedOne(it) {
				t.Error("the attempt is neither parked nor among those the take started")
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if n := p.most["hostile"]; n > probeConfig.Concurrency-probeConfig.Reserve {
				t.Errorf("the hostile merchant ran %d at once: the reserve of %d was lent", n, probeConfig.Reserve)
			}
		})
	}
}

// TestSchedulerRunsARefusedStartOnItsLease: a first attempt its publish
// leased, which Start refused (here: a take under way), goes to the
// schedule with its lease to hand over; when Run takes it back within the
// window, it runs on that lease (no lease statement), unless a change of
// subscriptions was announced meanwhile.
func TestSchedulerRunsARefusedStartOnItsLease(t *testing.T) {
	t.Parallel()
	cfg := probeConfig
	cfg.HandoverWindow, cfg.ChangesChannel = 30*time.Second, "test:subscriptions:changed"
	for _, tc := range []struct {
		name      string
		changed   bool
		wantLease bool
	}{
		{name: "taken back: it runs on its lease", wantLease: true},
		{name: "a change announced meanwhile: it leases anew", changed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gate := newTakeGate()
			p := newHookedSchedulerProbe(t, cfg, gate.hooks())
			gate.armed <- struct{}{}
			signal(p.s.wake)
			<-gate.holding // Run is taking: Start refuses
			it := attemptsOf("calm", 1, 1)[0]
			leased := store.LeasedDelivery{Delivery: store.Delivery{ID: it.Task.DeliveryID, MerchantID: "calm",
				SubscriptionID: it.Task.SubscriptionID}, Body: []byte(`{}`), LeaseUntil: time.Now().Add(cfg.AttemptTimeout)}
			it.Task.Leased = &leased
			if p.s.Start(it) {
				t.Fatal("Start took an attempt while Run was taking")
			}
			it.Task = it.Task.Parked() // as its publisher does
			if _, err := p.lanes.Push(context.Background(), it); err != nil {
				t.Fatal(err)
			}
			if tc.changed {
				// Announced until the scheduler hears it (its subscription
				// to the channel may not be confirmed yet).
				p.waitFor("the change to be heard", func() bool {
					if p.s.kept.len() == 0 {
						return true
					}
					if err := p.redis.Publish(context.Background(), cfg.ChangesChannel, "changed").Err(); err != nil {
						t.Error(err)
					}
					return false
				})
			}
			close(gate.resume)
			p.waitFor("the attempt", func() bool { return p.ended["calm"] == 1 })
			p.mu.Lock()
			defer p.mu.Unlock()
			got := p.leases[it.ID]
			switch {
			case tc.wantLease && (got == nil || !got.LeaseUntil.Equal(leased.LeaseUntil)):
				t.Errorf("the attempt ran on %+v, want the publish's lease", got)
			case !tc.wantLease && got != nil:
				t.Errorf("the attempt ran on the publish's lease after a change")
			}
			want := 0.0
			if tc.wantLease {
				want = 1
			}
			if n := testutil.ToFloat64(p.metrics.StartedOnPublishLease); n != want {
				t.Errorf("webhookd_attempts_on_publish_lease_total %v, want %v", n, want)
			}
		})
	}
}
