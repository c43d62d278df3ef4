package deliver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
)

// SchedulerConfig is what the scheduler needs.
type SchedulerConfig struct {
	// Concurrency is the pool: how many attempts run at once in this
	// process (required).
	Concurrency int
	// Share is how many attempts one merchant may run here while another
	// merchant has due work (required, at most Concurrency).
	Share int
	// SubscriptionCap is how many attempts one subscription may run here
	// within its merchant's share (required).
	SubscriptionCap int
	// CircuitAfter is how many attempts in a row must time out before a
	// subscription is held to one attempt at a time (required).
	CircuitAfter int
	// Reserve is how many free slots are never lent to a merchant beyond
	// its share, so that another merchant's new work starts at once even
	// while one merchant's lent attempts hang until the timeout.
	Reserve int
	// AttemptTimeout bounds one attempt, lease to record (required).
	AttemptTimeout time.Duration
	// Held is how long an attempt taken counts as held for the sweeper
	// before its delivery is leased: the sweeper's grace (required).
	Held time.Duration
	// IdleCheck is the longest the loop waits without looking at the
	// schedule; zero means idleCheck. Tests lengthen it to show that
	// nothing relies on it.
	IdleCheck time.Duration
	// HandoverWindow is how long after its publish a first attempt that
	// Start refused, leased by the publish, may still run on that lease
	// when Run takes it back from the schedule (keptLeases); 0: never.
	HandoverWindow time.Duration
	// ChangesChannel is the Redis channel on which changes of
	// subscriptions are announced: each message empties the kept leases.
	// Required with a HandoverWindow.
	ChangesChannel string
}

func (c SchedulerConfig) validate() error {
	switch {
	case c.Concurrency < 1 || c.Share < 1 || c.Share > c.Concurrency:
		return fmt.Errorf("scheduler: need 1 ≤ Share (%d) ≤ Concurrency (%d)", c.Share, c.Concurrency)
	case c.SubscriptionCap < 1 || c.CircuitAfter < 1:
		return errors.New("scheduler: SubscriptionCap and CircuitAfter must be positive")
	case c.Reserve < 0 || c.Reserve >= c.Concurrency:
		return fmt.Errorf("scheduler: Reserve must be in [0, Concurrency), not %d", c.Reserve)
	case c.AttemptTimeout <= 0 || c.Held <= 0:
		return errors.New("scheduler: AttemptTimeout and Held must be positive")
	case c.HandoverWindow < 0 || c.HandoverWindow >= c.AttemptTimeout:
		return fmt.Errorf("scheduler: HandoverWindow must be in [0, AttemptTimeout), not %v", c.HandoverWindow)
	case c.HandoverWindow > 0 && c.ChangesChannel == "":
		return errors.New("scheduler: a HandoverWindow needs the ChangesChannel that empties it")
	}
	return nil
}

// maxTake bounds the attempts one take script hands over.
const maxTake = 64

// idleCheck is the longest the scheduler waits without looking at the
// schedule: a lost wake message (a Redis failover) costs at most this.
const idleCheck = time.Second

// subscribeWait bounds Run's wait for Redis to confirm its subscription to
// the wake messages before its first take.
const subscribeWait = 5 * time.Second

// Scheduler is a worker process's pool of attempt slots and the loop that
// fills them from the schedule (lanes). The fairness model (docs/decisions.md):
//
//   - isolation: a merchant runs at most Share attempts here while other
//     merchants have due work, and one subscription at most
//     SubscriptionCap of them (1 once its attempts keep timing out), so a
//     merchant's hanging endpoints cost that merchant's share only;
//   - work conservation: slots no merchant under its share can use are
//     lent to merchants over it, up to all but Reserve slots, and never to
//     a subscription whose last attempt timed out; a lent slot comes back
//     when its attempt ends (a running attempt is never cut);
//   - fair order: due work is taken round-robin over merchants, then over
//     each merchant's subscriptions, not in arrival order;
//   - waiting work costs nothing: it is parked in Redis until due, and the
//     loop wakes on a push, a freed slot or the next due time.
//
// The counts are this process's: with N workers a merchant holds at most
// N·Share slots in all, without a Redis round trip per slot.
type Scheduler struct {
	cfg     SchedulerConfig
	lanes   *queue.Lanes
	redis   redis.UniversalClient
	attempt func(ctx context.Context, it queue.LaneItem, held *heldSlots)
	metrics *metrics.Set
	clock   clock.Clock
	logger  *slog.Logger

	mu        sync.Mutex
	busy      int
	merchants map[string]int
	subs      map[string]int
	// timeouts counts, per subscription, its attempts in a row that timed
	// out (the circuit).
	timeouts map[string]int
	// freed and wake are signalled when a slot is given back and when work
	// is pushed; each holds one signal at most.
	freed chan struct{}
	wake  chan struct{}
	// run is the Run in progress, whose attempts Start adds to; nil
	// before and after it, when Start refuses.
	run *schedulerRun
	// taking is set while Run takes from the schedule what the slots it
	// counted free allow, from its snapshot until the items taken hold
	// their slots, when Start refuses: a start meanwhile would take a
	// slot the take already counted, and the two together could lend a
	// merchant the reserve (TestOneMerchantLeavesOthersTheReserve caught
	// eight of eight slots held by one merchant on a loaded CI machine;
	// TestSchedulerStartDuringATake forces it). A refused start goes
	// through the schedule, as when the pool is busy. (Deferring such a
	// start to the take's end instead, and weighing it then, cost the
	// ordered bench a tenth of its rate: BENCHMARKS.md.)
	taking bool
	// kept are the publish's leases of the first attempts Start refused,
	// for Run to run them on when it takes them back.
	kept *keptLeases
	// hooks are the tests' seams; nil outside tests.
	hooks *schedulerHooks
}

// schedulerHooks let a test hold Run at a point of its loop, to force an
// interleaving that a loaded machine produces only by chance.
type schedulerHooks struct {
	// beforeTake runs after the snapshot, before the take asks Redis.
	beforeTake func()
}

// schedulerRun is one Run: its context and the attempts it waits for
// when it ends.
type schedulerRun struct {
	ctx      context.Context
	attempts *goroutines
}

// SchedulerDeps are what a Scheduler works with besides its
// SchedulerConfig.
type SchedulerDeps struct {
	// Lanes is the schedule the attempts are taken from.
	Lanes *queue.Lanes
	// Redis carries the wake messages of pushed work.
	Redis redis.UniversalClient
	// Attempt runs each attempt taken, on a goroutine of its own.
	Attempt func(ctx context.Context, it queue.LaneItem, held *heldSlots)
	// Metrics may be nil.
	Metrics *metrics.Set
	Clock   clock.Clock
	Logger  *slog.Logger
}

// NewScheduler checks cfg and builds the Scheduler of the schedule
// deps.Lanes, running deps.Attempt for each attempt taken.
func NewScheduler(cfg SchedulerConfig, deps SchedulerDeps) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Scheduler{cfg: cfg, lanes: deps.Lanes, redis: deps.Redis, attempt: deps.Attempt, metrics: deps.Metrics,
		clock: deps.Clock, logger: deps.Logger,
		merchants: map[string]int{}, subs: map[string]int{}, timeouts: map[string]int{},
		freed: make(chan struct{}, 1), wake: make(chan struct{}, 1), kept: newKeptLeases(cfg.HandoverWindow)}, nil
}

// Run fills the pool until ctx is done, then waits for the attempts in
// flight to end (each has its own deadline).
func (s *Scheduler) Run(ctx context.Context) {
	idle := cmp.Or(s.cfg.IdleCheck, idleCheck)
	watch := queue.NewShardWatch(s.lanes.Shards(), idle)
	channels := []string{queue.WakeChannel}
	if s.cfg.ChangesChannel != "" {
		channels = append(channels, s.cfg.ChangesChannel)
	}
	pubsub := s.redis.Subscribe(ctx, channels...)
	defer func() { _ = pubsub.Close() }()
	// The first take comes after Redis confirmed the subscription: work
	// pushed after that take and before the SUBSCRIBE was served (it
	// travels on a connection of its own) would wake no one, and wait
	// for the idle check (TestSchedulerLendsTheShareBack saw nothing start
	// in 10 s on a loaded CI machine, its idle check an hour away). If
	// Redis does not confirm (away, or a failover), the loop goes on and
	// the idle check looks meanwhile.
	subscribed, cancel := context.WithTimeout(ctx, subscribeWait)
	if _, err := pubsub.Receive(subscribed); err != nil && ctx.Err() == nil {
		s.logger.WarnContext(ctx, "subscribe to the schedule's wakes; the idle check looks meanwhile", "error", err)
	}
	cancel()
	go func() {
		for msg := range pubsub.Channel() {
			if msg.Channel == s.cfg.ChangesChannel {
				s.kept.empty()
				continue
			}
			watch.Woken(msg.Payload)
			signal(s.wake)
		}
	}()
	run := &schedulerRun{ctx: ctx, attempts: newGoroutines(goroutineKeep)}
	s.mu.Lock()
	s.run = run
	s.mu.Unlock()
	defer func() {
		// Start adds no attempt once run is gone, so the wait below
		// cannot race with one.
		s.mu.Lock()
		s.run = nil
		s.mu.Unlock()
		run.attempts.Close()
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	failures := 0
	// heldBack: a take left due work it could not start (a share, a cap,
	// the reserve) or a shard was woken and not read yet, so a slot that
	// frees is worth a take; else only new work, a due time or the idle
	// check is.
	heldBack := true
	for {
		wait := idle
		free, r := s.snapshot()
		if free == 0 {
			// Work pushed while every slot is busy waits for one: the
			// next freed slot must look.
			heldBack = true
		}
		if free > 0 {
			if s.hooks != nil && s.hooks.beforeTake != nil {
				s.hooks.beforeTake()
			}
			now := s.clock.Now()
			look := watch.Due(now)
			var got queue.Taken
			var err error
			if len(look.Shards) > 0 {
				got, err = s.lanes.Take(ctx, queue.TakeRequest{Now: now, Want: min(free, maxTake), Share: s.cfg.Share,
					SubscriptionCap: s.cfg.SubscriptionCap, Lendable: max(0, free-s.cfg.Reserve), Held: s.cfg.Held,
					Shards: look.Shards}, r)
				watch.Saw(look, got)
			}
			// What the shards that answered gave starts even when another
			// could not be read (its Redis node away).
			for _, it := range got.Items {
				if l, ok := s.kept.take(it.Task, s.clock.Now()); ok {
					it.Task.Leased = &l
					if s.metrics != nil {
						s.metrics.StartedOnPublishLease.Inc()
					}
				}
				held := s.hold(it.Task)
				run.attempts.Go(func() { s.run1(ctx, it, held) })
			}
			s.mu.Lock()
			s.taking = false
			s.mu.Unlock()
			switch {
			case err != nil && ctx.Err() != nil:
				return
			case len(got.Items) > 0:
				failures = 0
				continue
			case err != nil:
				failures++
				wait = min(50*time.Millisecond<<min(failures, 5), idle)
				s.logger.WarnContext(ctx, "take due attempts; trying again", "error", err, "retry_in", wait)
			default:
				failures = 0
			}
			heldBack = watch.HeldBack()
			if next := watch.Next(); !next.IsZero() {
				wait = min(wait, max(next.Sub(s.clock.Now()), time.Millisecond))
			}
		}
		freed := s.freed
		if !heldBack {
			freed = nil // nothing waits for a slot: a freed one is no reason to look
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-freed:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// run1 makes one attempt in its slots, on a context of its own: a
// shutdown lets it finish and be recorded. Then, in the same pool slot, the
// attempt it handed its slot on to (heldSlots.handOff), if any; on
// shutdown that one goes back to the schedule instead.
func (s *Scheduler) run1(ctx context.Context, it queue.LaneItem, held *heldSlots) {
	for {
		s.runOne(ctx, it, held)
		next := held.handedOn()
		if next == nil {
			return
		}
		if ctx.Err() != nil {
			next.held.release()
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queue.EnqueueTimeout)
			if _, err := s.lanes.Push(pctx, next.item); err != nil {
				s.logger.WarnContext(ctx, "schedule the next attempt of an ordered line; the sweeper will",
					"delivery_id", next.item.Task.DeliveryID, "error", err)
			}
			cancel()
			return
		}
		it, held = next.item, next.held
	}
}

// runOne is run1 for one attempt.
func (s *Scheduler) runOne(ctx context.Context, it queue.LaneItem, held *heldSlots) {
	defer held.release()
	defer func() {
		// A panicking attempt must not take the worker's other attempts
		// with it (asynq recovered its handlers' panics the same way). Its
		// delivery is no loss: once its lease lapses the sweeper parks it
		// again.
		if v := recover(); v != nil {
			s.logger.ErrorContext(ctx, "attempt panicked; the sweeper makes it again once its lease lapses",
				"delivery_id", it.Task.DeliveryID, "attempt", it.Task.Number, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	// An attempt on a lease its publish took ends with that lease, which
	// may be shorter than a whole AttemptTimeout from now. (A lease
	// already over by this clock, which only a clock set apart from the
	// publisher's can show, leaves the attempt its whole timeout, as
	// before.)
	timeout := s.cfg.AttemptTimeout
	if l := it.Task.Leased; l != nil {
		if left := l.LeaseUntil.Sub(s.clock.Now()); left > 0 {
			timeout = min(timeout, left)
		}
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	s.attempt(actx, it, held)
}

// Start makes it, a first attempt just stored by this process's
// publisher, in this pool at once, without the trip through the schedule
// (a push, a wake, a take), where a take would have given it a slot now
// (admits): due, neither paced nor batched, its merchant under its share
// and its subscription under its cap here, and a slot free. It holds its
// slots from now. False: nothing is held, and the caller parks it in the
// schedule, as when the pool is busy or stopping. Either way a crash loses
// nothing: the delivery is stored and due, and until a worker leases it
// the sweeper finds it. While Run takes from the schedule (taking) it
// refuses: the slots are not known until the items taken hold theirs. A
// refused attempt that its publish leased is kept (keptLeases), so that
// when Run takes it back soon enough it runs on that lease.
func (s *Scheduler) Start(it queue.LaneItem) bool {
	if s.start(it) {
		return true
	}
	if it.Task.Leased != nil {
		s.kept.keep(*it.Task.Leased, s.clock.Now())
	}
	return false
}

// start is Start but for keeping the lease of an attempt it refuses.
func (s *Scheduler) start(it queue.LaneItem) bool {
	if !runsNow(it.Task, s.clock.Now()) {
		return false
	}
	m, sub := queue.MerchantLane(it.Task), it.Task.SubscriptionID.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.run
	if run == nil || run.ctx.Err() != nil || s.taking || !s.admits(m, sub) {
		return false
	}
	s.busy++
	held := s.countLocked(m, sub)
	run.attempts.Go(func() { s.run1(run.ctx, it, held) })
	return true
}

// runsNow reports whether an attempt may skip the schedule and start at
// once: a scheduled attempt due now, outside any rate limit (which the
// schedule paces) and any batch (which the schedule forms).
func runsNow(t queue.Attempt, now time.Time) bool {
	return t.Trigger != store.TriggerManual && t.RateLimit == 0 && t.BatchSize == 0 && !t.Due.After(now)
}

// admits reports whether a take would give an attempt of merchant m and
// subscription sub a slot now without lending: its merchant under its
// share, its subscription under its cap, and a slot free in the pool, so
// that no other merchant's due work waits for the slot it takes. Called
// with mu held.
func (s *Scheduler) admits(m, sub string) bool {
	return s.busy < s.cfg.Concurrency && s.merchants[m] < s.cfg.Share && s.subs[sub] < s.capOf(sub)
}

// signal leaves one signal on c unless one waits there.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// snapshot is the free slots and what runs, as take weighs them. When a
// slot is free, Run is about to take: Start refuses (taking) until the
// taken items hold their slots.
func (s *Scheduler) snapshot() (int, queue.Running) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taking = s.busy < s.cfg.Concurrency
	r := queue.Running{Merchants: make(map[string]int, len(s.merchants)), SubscriptionRoom: make(map[string]int, len(s.subs)),
		Unlendable: map[string]bool{}}
	for m, n := range s.merchants {
		r.Merchants[m] = n
	}
	for sub, n := range s.subs {
		r.SubscriptionRoom[sub] = max(0, s.capOf(sub)-n)
	}
	for sub, n := range s.timeouts {
		if _, ok := r.SubscriptionRoom[sub]; !ok && n >= s.cfg.CircuitAfter {
			r.SubscriptionRoom[sub] = 1
		}
		r.Unlendable[sub] = true
	}
	return s.cfg.Concurrency - s.busy, r
}

// capOf is how many attempts a subscription may run here: one while its
// circuit is open. Called with mu held.
func (s *Scheduler) capOf(sub string) int {
	if s.timeouts[sub] >= s.cfg.CircuitAfter {
		return 1
	}
	return s.cfg.SubscriptionCap
}

// hold counts a taken attempt against the pool, its merchant and its
// subscription.
func (s *Scheduler) hold(t queue.Attempt) *heldSlots {
	m, sub := queue.MerchantLane(t), t.SubscriptionID.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy++
	return s.countLocked(m, sub)
}

// countLocked counts an attempt against its merchant and subscription and
// returns the slots it holds; the pool slot is the caller's to count (a
// hand-off passes one on). Called with mu held.
func (s *Scheduler) countLocked(m, sub string) *heldSlots {
	s.merchants[m]++
	s.subs[sub]++
	return &heldSlots{s: s, merchant: m, subscription: sub}
}

// maxTrackedTimeouts bounds the circuit's memory: subscriptions deleted
// while timing out would otherwise stay in it.
const maxTrackedTimeouts = 100_000

// heldSlots are the slots one attempt holds: the merchant's and the
// subscription's until the HTTP exchange ends (the caps bound what hangs
// on receivers), the pool's until the outcome is recorded.
type heldSlots struct {
	s                      *Scheduler
	merchant, subscription string
	send, pool             sync.Once
	// next is the attempt this one handed its pool slot on to.
	next *handedOff
}

// handedOff is an attempt handed a pool slot by the attempt before it, with
// the slots it holds.
type handedOff struct {
	item queue.LaneItem
	held *heldSlots
}

// handOff gives this attempt's pool slot, once the attempt ends, to it:
// the next attempt of the ordered line this attempt ended, due now. The
// slot goes on only where a take would have given one: its merchant under
// its share and its subscription under its cap here (what a take grants
// without lending), and only while the pool has a free slot besides this
// one, so that no other merchant's due work waits for the slot it keeps.
// Then it holds its merchant's and subscription's slots from now, and
// run1 makes it when this attempt returns. False: nothing is held, and the
// caller parks it in the schedule.
func (h *heldSlots) handOff(it queue.LaneItem) bool {
	s := h.s
	m, sub := queue.MerchantLane(it.Task), it.Task.SubscriptionID.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.next != nil || !s.admits(m, sub) {
		return false
	}
	given := false
	h.pool.Do(func() { given = true }) // the pool slot goes on, not back
	if !given {
		return false
	}
	h.next = &handedOff{item: it, held: s.countLocked(m, sub)}
	return true
}

// handedOn is the attempt handed this one's pool slot, or nil.
func (h *heldSlots) handedOn() *handedOff {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.next
}

// exchanged gives back the merchant's and the subscription's slots once
// the exchange is over, and tells the circuit whether it timed out.
func (h *heldSlots) exchanged(timedOut bool) {
	h.send.Do(func() {
		s := h.s
		s.mu.Lock()
		if timedOut {
			if len(s.timeouts) >= maxTrackedTimeouts {
				clear(s.timeouts)
			}
			s.timeouts[h.subscription]++
		} else {
			delete(s.timeouts, h.subscription)
		}
		decrement(s.merchants, h.merchant)
		decrement(s.subs, h.subscription)
		s.mu.Unlock()
		signal(s.freed)
	})
}

// release gives back every slot still held.
func (h *heldSlots) release() {
	h.send.Do(func() {
		s := h.s
		s.mu.Lock()
		decrement(s.merchants, h.merchant)
		decrement(s.subs, h.subscription)
		s.mu.Unlock()
	})
	h.pool.Do(func() {
		h.s.mu.Lock()
		h.s.busy--
		h.s.mu.Unlock()
		signal(h.s.freed)
	})
}

func decrement(m map[string]int, key string) {
	if m[key] <= 1 {
		delete(m, key)
		return
	}
	m[key]--
}
