package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
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
	mu    sync.Mutex
	now   map[string]int // running, by merchant
	most  map[string]int // most running at once, by merchant
	ended map[string]int // attempts ended, by merchant
	// release ends, by merchant, the attempts of the merchants that hang,
	// one per value: true ends it as a timeout.
	release map[string]chan bool
}

func newSchedulerProbe(t *testing.T, cfg SchedulerConfig, hangs ...string) *schedulerProbe {
	t.Helper()
	rd := storetest.NewRedis(t)
	rc := redis.NewClient(&redis.Options{Network: "unix", Addr: rd.Socket})
	t.Cleanup(func() { _ = rc.Close() })
	p := &schedulerProbe{t: t, lanes: queue.NewLanes(rc, 0), now: map[string]int{}, most: map[string]int{}, ended: map[string]int{},
		release: map[string]chan bool{}}
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
	s, err := NewScheduler(cfg, SchedulerDeps{Lanes: p.lanes, Redis: rc, Attempt: attempt, Clock: clock.System{},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
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
	ids := make([]uuid.UUID, subs)
	for i := range ids {
		ids[i] = uuid.New()
	}
	items := make([]queue.LaneItem, n)
	for i := range items {
		items[i] = queue.LaneItem{ID: fmt.Sprintf("%s-%d", m, i), Task: queue.Attempt{DeliveryID: uuid.New(), SubscriptionID: ids[i%subs],
			MerchantID: m, Number: 1, Trigger: store.TriggerScheduled, Due: time.Now()}}
	}
	if _, err := p.lanes.Push(context.Background(), items...); err != nil {
		p.t.Fatal(err)
	}
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
