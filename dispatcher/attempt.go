package dispatcher

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/store"
)

// throttleWait is how long an attempt waits for its subscription's slot
// before going back on the queue.
const throttleWait = 100 * time.Millisecond

// enqueueTimeout bounds one enqueue of a follow-up task; past it the
// sweeper takes over.
const enqueueTimeout = 5 * time.Second

// recordPatience is how long an attempt's outcome waits for Postgres to
// come back before the attempt is given up and, once its lease lapses, made
// again.
const recordPatience = time.Minute

// maxEarlyWait is the longest an attempt task handed over before its due
// time waits in its worker. asynq hands tasks over up to a second early
// (it keeps their time in whole seconds); a task earlier than that goes
// back on the queue instead of holding a worker.
const maxEarlyWait = 2 * time.Second

// attemptRunnerConfig is what the attemptRunner needs.
type attemptRunnerConfig struct {
	// Store is the database (required).
	Store *store.Store
	// Schedule is the retry schedule (required).
	Schedule retry.Schedule
	// Jitter draws each retry delay's jitter, in [-1, 1] (required).
	Jitter func() float64
	// LeaseFor is how long a delivery is held for one attempt (required).
	LeaseFor time.Duration
	// DeliveryTimeout bounds one HTTP exchange (required): a
	// first-attempts task starts no attempt its own deadline would cut.
	DeliveryTimeout time.Duration
	// Notifier hears of deliveries that failed for good; may be nil.
	Notifier Notifier
}

func (c attemptRunnerConfig) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("attempt runner: Store is required")
	case len(c.Schedule.Delays) == 0:
		return errors.New("attempt runner: Schedule is required")
	case c.Jitter == nil:
		return errors.New("attempt runner: Jitter is required")
	case c.LeaseFor <= 0 || c.DeliveryTimeout <= 0:
		return errors.New("attempt runner: LeaseFor and DeliveryTimeout must be positive")
	}
	return nil
}

// attemptRunner makes attempts: lease the delivery, sign and POST
// (sender), record (Recorder), schedule the next. It serves TaskAttempt and
// TaskFirstAttempts.
type attemptRunner struct {
	cfg      attemptRunnerConfig
	leaser   *leaser
	recorder Recorder
	sender   *sender
	relay    *relay
	secrets  *secretCache
	slots    *attemptSlots
	rates    *deliveryRates
	tasks    *enqueuer
	metrics  *metrics
	clock    Clock
	logger   *slog.Logger
}

// notDue reports an attempt task handed over too long before its due time,
// or a subscription at its concurrency cap: it goes back on the queue for
// after, and asynq does not count it as a failure.
type notDue struct {
	after time.Duration
	// why is the reason label of webhookd_attempts_deferred_total.
	why deferral
}

// deferral is why an attempt task went back on the queue.
type deferral string

// The reasons an attempt is deferred.
const (
	// deferredEarly: handed over before its due time.
	deferredEarly deferral = "early"
	// deferredConcurrency: its merchant's share or its subscription's cap
	// is full in this process.
	deferredConcurrency deferral = "concurrency"
	// deferredRateLimit: its subscription's rate limit is spent.
	deferredRateLimit deferral = "rate_limit"
	// deferredBusy: a manual attempt while another attempt of the delivery
	// runs.
	deferredBusy deferral = "busy"
)

func (n notDue) Error() string { return fmt.Sprintf("not due for %v", n.after) }

// handleAttempt runs one attempt task. It returns an error only when the
// attempt could not run for an internal reason and should be retried.
func (r *attemptRunner) handleAttempt(ctx context.Context, t *asynq.Task) error {
	var at attemptTask
	if err := json.Unmarshal(t.Payload(), &at); err != nil || (at.Number < 1 && at.Trigger != store.TriggerManual) {
		r.logger.ErrorContext(ctx, "attempt task unreadable; dropped", "error", err)
		return asynq.RevokeTask
	}
	if err := r.waitUntilDue(ctx, at); err != nil {
		return err
	}
	held, backOff, ok, err := r.slots.take(ctx, at, throttleWait)
	if err != nil {
		return err
	}
	if !ok {
		return notDue{after: backOff, why: deferredConcurrency}
	}
	defer held.release()
	// Over its subscription's rate limit, the attempt waits its turn: in
	// this worker when the turn is near, else back on the queue. Neither
	// counts as an attempt.
	if wait, err := r.rates.await(ctx, at.SubscriptionID, at.RateLimit, throttleWait); err != nil || wait > 0 {
		return cmp.Or(err, error(notDue{after: wait, why: deferredRateLimit}))
	}
	return r.attempt(ctx, at, held)
}

// handleFirstAttempts runs an event's first attempts concurrently, each in
// a slot of the worker pool: however large the fan-out, no more attempts
// run at once than the pool holds. An attempt over its merchant's or
// subscription's cap, or that fails for an internal reason, is handed to a
// task of its own, which waits its turn or is retried like any attempt.
func (r *attemptRunner) handleFirstAttempts(ctx context.Context, t *asynq.Task) error {
	var ft firstAttemptsTask
	if err := json.Unmarshal(t.Payload(), &ft); err != nil {
		r.logger.ErrorContext(ctx, "first-attempts task unreadable; dropped (the sweeper will find its deliveries)", "error", err)
		return asynq.RevokeTask
	}
	deadline, hasDeadline := ctx.Deadline()
	var wg sync.WaitGroup
	for i, at := range ft.Attempts {
		var held *heldSlots
		ok, err := false, error(nil)
		if hasDeadline && deadline.Sub(r.clock.Now()) < r.cfg.DeliveryTimeout {
			err = errors.New("the first-attempts task's deadline is too near for another attempt")
		} else {
			var wait time.Duration
			if wait, err = r.rates.take(ctx, at.SubscriptionID, at.RateLimit); err == nil && wait == 0 {
				held, _, ok, err = r.slots.take(ctx, at, throttleWait)
			}
		}
		if err != nil {
			// A large fan-out outlasts its task: the rest wait in tasks of
			// their own rather than be cut short.
			r.logger.InfoContext(ctx, "first attempts handed to tasks of their own", "event_id", ft.EventID,
				"attempts", len(ft.Attempts)-i, "cause", err)
			for _, rest := range ft.Attempts[i:] {
				r.handOff(ctx, rest, nil)
			}
			break
		}
		if !ok {
			r.handOff(ctx, at, nil)
			continue
		}
		wg.Go(func() {
			defer held.release()
			if err := r.attempt(ctx, at, held); err != nil {
				r.handOff(ctx, at, err)
			}
		})
	}
	wg.Wait()
	return nil
}

// handOff gives one first attempt a task of its own, due now.
func (r *attemptRunner) handOff(ctx context.Context, at attemptTask, cause error) {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enqueueTimeout)
	defer cancel()
	at.Due = time.Time{}
	_, err := r.tasks.attempt(ectx, at, attemptTaskID(at.DeliveryID, at.Number))
	if err != nil || cause != nil {
		r.logger.WarnContext(ctx, "first attempt handed to a task of its own", "delivery_id", at.DeliveryID,
			"attempt", at.Number, "cause", errString(cause), "error", errString(err))
	}
}

// waitUntilDue holds the attempt until the time its delivery records: an
// attempt never starts before its next_attempt_at, whatever the second
// asynq rounded it to.
func (r *attemptRunner) waitUntilDue(ctx context.Context, at attemptTask) error {
	wait := at.Due.Sub(r.clock.Now())
	if at.Due.IsZero() || wait <= 0 {
		return nil
	}
	if wait > maxEarlyWait {
		return notDue{after: wait, why: deferredEarly}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lease takes the delivery of an attempt task.
func (r *attemptRunner) lease(ctx context.Context, at *attemptTask, now time.Time) (store.LeasedDelivery, error) {
	if at.Trigger != store.TriggerManual {
		return r.leaser.lease(ctx, store.LeaseRequest{ID: at.DeliveryID, CreatedAt: at.CreatedAt, Number: at.Number})
	}
	// A manual attempt takes its number (attempt_count+1) when it leases.
	// While another attempt of the delivery runs it goes back on the queue
	// for a moment and runs right after.
	leased, err := r.cfg.Store.LeaseManualAttempt(ctx, at.MerchantID, at.DeliveryID, now, r.cfg.LeaseFor)
	if errors.Is(err, store.ErrConflict) {
		return store.LeasedDelivery{}, notDue{after: throttleWait, why: deferredBusy}
	}
	if err != nil {
		return store.LeasedDelivery{}, err
	}
	at.Number = leased.AttemptCount + 1
	return leased, nil
}

// attempt makes one attempt of a delivery, in the slots held, and
// schedules the next.
func (r *attemptRunner) attempt(ctx context.Context, at attemptTask, held *heldSlots) error {
	now := r.clock.Now()
	leased, err := r.lease(ctx, &at, now)
	if errors.Is(err, store.ErrNotFound) {
		// Already attempted, finished, or running elsewhere: this task is
		// stale or a duplicate.
		r.logger.DebugContext(ctx, "attempt task is stale", "delivery_id", at.DeliveryID, "attempt", at.Number)
		return nil
	}
	if err != nil {
		return err
	}
	log := r.logger.With("event_id", leased.EventID, "delivery_id", leased.ID, "attempt", at.Number,
		"subscription_id", leased.SubscriptionID)
	if at.Trigger != store.TriggerManual && leased.NextAttemptAt != nil && leased.NextAttemptAt.After(now) && at.Number > 1 {
		// A task without its due time (enqueued by an older build) that
		// asynq handed over early.
		r.releaseLease(ctx, leased, log)
		return notDue{after: leased.NextAttemptAt.Sub(now), why: deferredEarly}
	}
	// An ended listener is deleted too, but its delivery goes on to the
	// relay, which records why it stops (listener_closed).
	if (leased.SubscriptionDeleted && leased.Kind != store.KindListener) || (leased.SubscriptionStatus != store.SubscriptionEnabled && !leased.Test) {
		if at.Trigger == store.TriggerManual {
			// The delivery stays as it was; nothing was sent.
			log.InfoContext(ctx, "subscription deleted or disabled since redeliver; manual attempt dropped")
			r.releaseLease(ctx, leased, log)
			return nil
		}
		log.InfoContext(ctx, "subscription deleted or disabled; delivery abandoned")
		if err := r.cfg.Store.AbandonDelivery(ctx, leased.Delivery, now); err != nil {
			return err
		}
		if endsLine(leased.Delivery, store.DeliveryFailed) {
			r.enqueueLineHead(ctx, leased.Delivery, log)
		}
		return nil
	}
	if at.RateLimit == 0 && leased.RateLimit > 0 {
		// A task that did not know the limit (the sweeper's, one from an
		// older build) is held to it now. Manual attempts are outside it.
		wait, err := r.rates.take(ctx, leased.SubscriptionID, leased.RateLimit)
		if err != nil || wait > 0 {
			r.releaseLease(ctx, leased, log)
			return cmp.Or(err, error(notDue{after: wait, why: deferredRateLimit}))
		}
	}
	keys, err := r.secrets.keys(ctx, leased.SubscriptionID, leased.SubscriptionVersion, now)
	if err != nil {
		r.releaseLease(ctx, leased, log)
		return err
	}

	res, err := r.exchange(ctx, leased, keys)
	held.endSend()
	if err != nil {
		r.releaseLease(ctx, leased, log)
		return err
	}
	rec := decide(r.cfg.Schedule, r.cfg.Jitter(), leased.Delivery, at, res)
	developer := leased.Kind == store.KindListener
	if !developer {
		r.metrics.attempts.WithLabelValues(res.outcome).Inc()
		r.metrics.attemptDuration.Observe(res.duration.Seconds())
	}

	// Recorded before the task is acknowledged; a cancelled task context
	// must not lose a result that was obtained.
	if err := r.record(context.WithoutCancel(ctx), rec, log); err != nil {
		if errors.Is(err, store.ErrConflict) {
			log.WarnContext(ctx, "attempt already recorded by another worker", "error", err)
			return nil
		}
		return err
	}
	r.observe(ctx, log, leased.Delivery, at, rec, res, developer)
	if endsLine(leased.Delivery, rec.Status) {
		r.enqueueLineHead(ctx, leased.Delivery, log)
	}
	if rec.NextAttemptAt != nil {
		// The task's own deadline may be nearly spent by a slow receiver;
		// the next attempt deserves its own.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enqueueTimeout)
		_, err := r.tasks.attempt(ectx, scheduledAttempt(leased.Delivery, at.Number+1, *rec.NextAttemptAt),
			attemptTaskID(leased.ID, at.Number+1))
		cancel()
		if err != nil {
			log.WarnContext(ctx, "enqueue next attempt; the sweeper will retry", "error", err)
		}
	}
	return nil
}

// record writes an attempt's outcome, retrying while Postgres is
// unreachable (a restart, a failover): the receiver has answered, and an
// outcome that is not recorded means the attempt is made again, a
// duplicate for the receiver. Retrying past the lease is safe: if another
// worker made the attempt meanwhile, the store refuses the second record of
// one attempt number (ErrConflict).
func (r *attemptRunner) record(ctx context.Context, rec store.AttemptRecord, log *slog.Logger) error {
	deadline := r.clock.Now().Add(recordPatience)
	wait := 50 * time.Millisecond
	for {
		err := r.recorder.Record(ctx, rec)
		if err == nil || errors.Is(err, store.ErrConflict) || errors.Is(err, errBatcherClosed) || r.clock.Now().Add(wait).After(deadline) {
			return err
		}
		log.WarnContext(ctx, "record attempt; retrying", "error", err, "retry_in", wait)
		time.Sleep(wait)
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// releaseLease gives the delivery back after an internal error, so that
// asynq's retry of the task can lease it at once.
func (r *attemptRunner) releaseLease(ctx context.Context, l store.LeasedDelivery, log *slog.Logger) {
	if err := r.cfg.Store.ReleaseLease(context.WithoutCancel(ctx), l.Delivery, l.LeaseUntil); err != nil {
		log.WarnContext(ctx, "release lease", "error", err)
	}
}

// observe updates the metrics and logs the attempt's outcome, and tells the
// Notifier of a real delivery that failed for good. A developer's
// delivery (to a `webhookd listen` listener) is only logged: a handler
// being written on a laptop fails often, and must neither move the
// operators' metrics and alerts nor send the merchant failure e-mails.
func (r *attemptRunner) observe(ctx context.Context, log *slog.Logger, del store.Delivery, at attemptTask, rec store.AttemptRecord, res result, developer bool) {
	attrs := []any{"outcome", res.outcome, "duration_ms", rec.Attempt.DurationMS, "trigger", at.Trigger}
	if res.httpStatus != nil {
		attrs = append(attrs, "http_status", *res.httpStatus)
	}
	if res.errCode != nil {
		attrs = append(attrs, "error", *res.errCode)
	}
	switch rec.Status {
	case store.DeliverySucceeded:
		if at.Trigger == store.TriggerScheduled && !developer {
			r.metrics.deliveryLatency.Observe(res.finished.Sub(del.EventCreatedAt).Seconds())
		}
		log.InfoContext(ctx, "delivery succeeded", attrs...)
	case store.DeliveryPending:
		if !developer {
			r.metrics.retriesScheduled.Inc()
		}
		log.InfoContext(ctx, "attempt failed; retry scheduled", append(attrs, "next_attempt_at", rec.NextAttemptAt)...)
	case store.DeliveryFailed:
		if rec.DisableSubscription && !del.Test {
			attrs = append(attrs, "subscription_disabled", true)
		}
		log.WarnContext(ctx, "delivery failed", attrs...)
		if !del.Test && !developer {
			r.metrics.deliveriesFailed.Inc()
			if r.cfg.Notifier != nil {
				del.Status, del.AttemptCount, del.NextAttemptAt = store.DeliveryFailed, at.Number, nil
				r.cfg.Notifier.DeliveryFailed(context.WithoutCancel(ctx), del)
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
