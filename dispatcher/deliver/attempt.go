// Package deliver is the worker side of the pipeline: it takes attempts
// from the schedule and makes them.
//
//   - scheduler.go: the Scheduler fills the process's pool from the
//     schedule, each merchant to its share and each subscription to its
//     cap, with the circuit for endpoints that hang.
//   - attempt.go: the Runner makes one attempt (lease, sign, send, record)
//     and parks the next; decide.go is its retry policy.
//   - sender.go and egress.go: the HTTP exchange, behind the address check
//     and the egress proxy; relay.go sends a listener's deliveries.
//   - leaser.go and recorder.go: the group commits of leases and outcomes;
//     keptleases.go: the publish's leases of first attempts the pool
//     refused, for the scheduler to run them on when it takes them back.
//   - secrets.go and headers.go: the signing keys and custom headers.
//   - ordering.go: the next delivery of an ordered line; drop.go: the
//     waiting work of a deleted or disabled subscription.
//   - worker.go: NewWorker builds them for a worker process.
package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/groupcommit"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/retry"
)

// busyWait is how long a manual attempt goes back to the schedule for
// while another attempt of its delivery runs.
const busyWait = 100 * time.Millisecond

// recordPatience is how long an attempt's outcome waits for Postgres to
// come back before the attempt is given up and, once its lease lapses, made
// again.
const recordPatience = time.Minute

// Notifier is told about deliveries that failed for good.
type Notifier interface {
	// DeliveryFailed is called after a real (non-test) delivery used up its
	// attempts or its manual attempt failed.
	DeliveryFailed(ctx context.Context, d store.Delivery)
}

// GoneNotifier, when the Notifier is one too, is told about a
// subscription its endpoint's 410 Gone just disabled.
type GoneNotifier interface {
	EndpointGone(ctx context.Context, d store.Delivery)
}

// TokenNotifier, when the Notifier is one too, is told about each real
// attempt that failed because its subscription's OAuth2 token endpoint
// did (oauth_token), why in the merchant's words: a token endpoint
// failing for long is news (webhook_endpoint.token_failing).
type TokenNotifier interface {
	TokenFailed(ctx context.Context, d store.Delivery, why string)
}

// runnerDeliveries is what the Runner needs of the database's deliveries:
// its leases and their ends, and the Dropper's ending of a gone
// subscription's work.
type runnerDeliveries interface {
	// LeaseDeliveries takes the rows of a batch's attempts in one
	// statement, one LeasedDelivery and one error per request.
	LeaseDeliveries(ctx context.Context, reqs []store.LeaseRequest, now time.Time, leaseFor time.Duration) ([]store.LeasedDelivery, []error, error)
	// ReleaseLease ends the lease identified by leaseUntil without
	// recording anything, so that the attempt can run again at once.
	ReleaseLease(ctx context.Context, d store.Delivery, leaseUntil time.Time) error
	// AbandonDelivery ends a delivery whose subscription is gone.
	AbandonDelivery(ctx context.Context, d store.Delivery, now time.Time) error
	// LineHead reads the delivery that now heads an ordering key's line.
	LineHead(ctx context.Context, subscriptionID uuid.UUID, key string) (store.Delivery, error)
	dropperStore
}

// manualAttemptLeaser is what the Runner needs of the database's manual
// attempts.
type manualAttemptLeaser interface {
	// LeaseManualAttempt takes the delivery of a manual attempt.
	LeaseManualAttempt(ctx context.Context, merchantID string, id uuid.UUID, now time.Time, leaseFor time.Duration) (store.LeasedDelivery, error)
}

// RunnerConfig is what the Runner needs.
type RunnerConfig struct {
	// Deliveries leases, releases and ends the deliveries (required).
	Deliveries runnerDeliveries
	// ManualAttempts leases the deliveries of manual attempts (required).
	ManualAttempts manualAttemptLeaser
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
	// RetryCap is the longest an attempt that failed for an internal
	// reason waits before it is tried again (required).
	RetryCap time.Duration
}

func (c RunnerConfig) validate() error {
	switch {
	case c.Deliveries == nil || c.ManualAttempts == nil:
		return errors.New("attempt runner: Deliveries and ManualAttempts are required")
	case len(c.Schedule.Delays) == 0:
		return errors.New("attempt runner: Schedule is required")
	case c.Jitter == nil:
		return errors.New("attempt runner: Jitter is required")
	case c.LeaseFor <= 0 || c.DeliveryTimeout <= 0 || c.RetryCap <= 0:
		return errors.New("attempt runner: LeaseFor, DeliveryTimeout and RetryCap must be positive")
	}
	return nil
}

// Runner makes attempts: lease the delivery, sign and POST
// (sender), record (Recorder), schedule the next. It serves TaskAttempt and
// TaskFirstAttempts.
type Runner struct {
	cfg      RunnerConfig
	leaser   *leaser
	recorder Recorder
	secrets  *SecretCache
	tasks    *queue.Enqueuer
	metrics  *metrics.Set
	clock    clock.Clock
	logger   *slog.Logger
	// tracer traces attempts (tracing.go); nil when tracing is off.
	tracer trace.Tracer

	// destinations sends every attempt, by the kind the registry
	// chooses for its subscription.
	destinations *destinations
	// transforms runs subscriptions' transformations (transform.go).
	transforms transforming
}

// NotDue reports an attempt task handed over too long before its due time,
// or a subscription at its concurrency cap: it goes back on the queue for
// after, and asynq does not count it as a failure.
type NotDue struct {
	// After is how long the task waits before it runs again.
	After time.Duration
	// Why is the reason label of webhookd_attempts_deferred_total.
	Why Deferral
}

// Deferral is why an attempt task went back on the queue.
type Deferral string

// The reasons an attempt is deferred.
const (
	// deferredEarly: handed over before its due time.
	deferredEarly Deferral = "early"
	// deferredBusy: a manual attempt while another attempt of the delivery
	// runs.
	deferredBusy Deferral = "busy"
)

// Error says how long the attempt waits.
func (n NotDue) Error() string { return fmt.Sprintf("not due for %v", n.After) }

// runTaken makes one attempt the scheduler took, in the slots it holds.
// An attempt that cannot run now (a manual attempt while another runs) goes
// back to the schedule for when it can; one that failed for an internal
// reason (Postgres unreachable) goes back with a growing backoff. Neither
// counts as an attempt, and what Redis loses meanwhile the sweeper finds.
func (r *Runner) runTaken(ctx context.Context, it queue.LaneItem, held *heldSlots) {
	err := r.attempt(ctx, it.Task, held)
	var nd NotDue
	switch {
	case err == nil:
		r.metrics.Tasks.WithLabelValues(queue.TaskAttempt, metrics.ResultDone).Inc()
		return
	case errors.As(err, &nd):
		r.metrics.Tasks.WithLabelValues(queue.TaskAttempt, metrics.ResultDeferred).Inc()
		r.metrics.Deferred.WithLabelValues(string(nd.Why)).Inc()
		it.Task.Due = r.clock.Now().Add(nd.After)
	default:
		it.Task.Retries++
		wait := min(time.Second<<min(it.Task.Retries-1, 6), r.cfg.RetryCap)
		r.metrics.Tasks.WithLabelValues(queue.TaskAttempt, metrics.ResultRetried).Inc()
		r.logger.WarnContext(ctx, "attempt failed for an internal reason; scheduled again", "delivery_id", it.Task.DeliveryID,
			"attempt", it.Task.Number, "error", err, "retry_in", wait)
		it.Task.Due = r.clock.Now().Add(wait)
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queue.EnqueueTimeout)
	defer cancel()
	if _, err := r.tasks.Lanes.Push(ectx, it); err != nil {
		r.logger.WarnContext(ctx, "schedule the attempt again; the sweeper will", "delivery_id", it.Task.DeliveryID, "error", err)
	}
}

// HandleLegacyAttempt moves an attempt task an older build enqueued on
// asynq into the schedule, due when it was.
func (r *Runner) HandleLegacyAttempt(ctx context.Context, t *asynq.Task) error {
	var at queue.Attempt
	if err := json.Unmarshal(t.Payload(), &at); err != nil || (at.Number < 1 && at.Trigger != store.TriggerManual) {
		r.logger.ErrorContext(ctx, "attempt task unreadable; dropped (the sweeper will find its delivery)", "error", err)
		return asynq.RevokeTask
	}
	id, _ := asynq.GetTaskID(ctx)
	if at.Trigger != store.TriggerManual {
		id = queue.AttemptTaskID(at.DeliveryID, at.Number)
	}
	_, err := r.tasks.Lanes.Push(ctx, queue.LaneItem{ID: id, Task: at})
	return err
}

// HandleLegacyFirstAttempts moves a first-attempts task an older build
// enqueued on asynq into the schedule.
func (r *Runner) HandleLegacyFirstAttempts(ctx context.Context, t *asynq.Task) error {
	var ft queue.FirstAttempts
	if err := json.Unmarshal(t.Payload(), &ft); err != nil {
		r.logger.ErrorContext(ctx, "first-attempts task unreadable; dropped (the sweeper will find its deliveries)", "error", err)
		return asynq.RevokeTask
	}
	items := make([]queue.LaneItem, len(ft.Attempts))
	for i, at := range ft.Attempts {
		items[i] = queue.LaneItem{ID: queue.AttemptTaskID(at.DeliveryID, at.Number), Task: at}
	}
	_, err := r.tasks.Lanes.Push(ctx, items...)
	return err
}

// lease takes the delivery of an attempt task.
func (r *Runner) lease(ctx context.Context, at *queue.Attempt, now time.Time) (store.LeasedDelivery, error) {
	if at.Leased != nil {
		// Leased by the publish that stored it, for this pool.
		leased := *at.Leased
		at.Leased = nil
		return leased, nil
	}
	if at.Trigger != store.TriggerManual {
		return r.leaser.lease(ctx, store.LeaseRequest{ID: at.DeliveryID, CreatedAt: at.CreatedAt, Number: at.Number, Handover: at.Handover})
	}
	// A manual attempt takes its number (attempt_count+1) when it leases.
	// While another attempt of the delivery runs it goes back on the queue
	// for a moment and runs right after.
	leased, err := r.cfg.ManualAttempts.LeaseManualAttempt(ctx, at.MerchantID, at.DeliveryID, now, r.cfg.LeaseFor)
	if errors.Is(err, store.ErrConflict) {
		return store.LeasedDelivery{}, NotDue{After: busyWait, Why: deferredBusy}
	}
	if err != nil {
		return store.LeasedDelivery{}, err
	}
	at.Number = leased.AttemptCount + 1
	return leased, nil
}

// attempt makes one attempt of a delivery, in the slots held, and
// schedules the next.
func (r *Runner) attempt(ctx context.Context, at queue.Attempt, held *heldSlots) error {
	now := r.clock.Now()
	tr := r.traceStart()
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
	ctx = tr.attempt(ctx, at, leased)
	ctx = explicitly(ctx, at, leased)
	defer tr.end()
	if at.Trigger != store.TriggerManual && leased.NextAttemptAt != nil && leased.NextAttemptAt.After(now) && at.Number > 1 {
		// A task without its due time (enqueued by an older build) that
		// asynq handed over early.
		r.releaseLease(ctx, leased, log)
		return NotDue{After: leased.NextAttemptAt.Sub(now), Why: deferredEarly}
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
		if err := r.cfg.Deliveries.AbandonDelivery(ctx, leased.Delivery, now); err != nil {
			return err
		}
		if endsLine(leased.Delivery, store.DeliveryFailed) {
			r.enqueueLineHead(ctx, leased.Delivery, log)
		}
		if !leased.Test {
			// The rest of its work can never run either: it leaves the
			// schedule now rather than cycle through it.
			r.dropSubscription(ctx, leased.MerchantID, leased.SubscriptionID, log)
			r.destinations.forget(leased.SubscriptionID)
		}
		return nil
	}
	if at.Trigger != store.TriggerManual && at.RateLimit != leased.RateLimit {
		// The subscription's limit changed since the attempt was parked:
		// its waiting attempts are paced by the new one from now on.
		if err := r.tasks.Lanes.SetRate(ctx, queue.MerchantLane(at), leased.SubscriptionID, leased.RateLimit); err != nil {
			log.WarnContext(ctx, "update the schedule's rate limit", "error", err)
		}
	}
	signed := tr.step(ctx, spanSign)
	sig, err := r.secrets.Signing(ctx, leased, now)
	signed(err)
	if err != nil {
		r.releaseLease(ctx, leased, log)
		return err
	}

	// The delivery's own timeout bounds the exchange (decide.go,
	// attemptTimeout); the sender's and the brokers' deadlines are the
	// engine's, and the nearer one wins.
	xctx, cancel := context.WithTimeout(ctx, attemptTimeout(r.cfg.DeliveryTimeout, leased))
	res, err := r.exchange(xctx, leased, sig)
	cancel()
	tr.result(res, err)
	held.exchanged(err == nil && res.outcome == metrics.OutcomeTimeout)
	if err != nil {
		r.releaseLease(ctx, leased, log)
		return err
	}
	rec := decide(r.cfg.Schedule, r.cfg.Jitter(), leased.Delivery, at, res)
	developer := leased.Kind == store.KindListener
	if !developer && !res.skipped {
		r.metrics.Attempts.WithLabelValues(res.outcome).Inc()
		tr.observe(r.metrics.AttemptDuration, res.Duration.Seconds())
	}

	// Recorded before the task is acknowledged; a cancelled task context
	// must not lose a result that was obtained.
	recorded := tr.step(ctx, spanRecord)
	head, err := r.record(context.WithoutCancel(ctx), rec, log)
	recorded(err)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			log.WarnContext(ctx, "attempt already recorded by another worker", "error", err)
			return nil
		}
		return err
	}
	r.observe(ctx, log, observed{delivery: leased.Delivery, attempt: at, record: rec, result: res, developer: developer})
	if endsLine(leased.Delivery, rec.Status) {
		r.nextInLine(ctx, leased.Delivery, head, held, log)
	}
	if rec.NextAttemptAt != nil {
		// The task's own deadline may be nearly spent by a slow receiver;
		// the next attempt deserves its own.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queue.EnqueueTimeout)
		_, err := r.tasks.Schedule(ectx, queue.ScheduledAttempt(leased.Delivery, at.Number+1, *rec.NextAttemptAt),
			queue.AttemptTaskID(leased.ID, at.Number+1))
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
//
// When the recorder reads it (nextRecorder), it returns the delivery that
// now heads the ordered line the record ended, if any.
func (r *Runner) record(ctx context.Context, rec store.AttemptRecord, log *slog.Logger) (*store.Delivery, error) {
	deadline := r.clock.Now().Add(recordPatience)
	wait := 50 * time.Millisecond
	next, reads := r.recorder.(nextRecorder)
	for {
		var head *store.Delivery
		var err error
		if reads {
			head, err = next.RecordNext(ctx, rec)
		} else {
			err = r.recorder.Record(ctx, rec)
		}
		if err == nil || errors.Is(err, store.ErrConflict) || errors.Is(err, groupcommit.ErrClosed) || r.clock.Now().Add(wait).After(deadline) {
			return head, err
		}
		log.WarnContext(ctx, "record attempt; retrying", "error", err, "retry_in", wait)
		time.Sleep(wait)
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// releaseLease gives the delivery back after an internal error, so that
// asynq's retry of the task can lease it at once.
func (r *Runner) releaseLease(ctx context.Context, l store.LeasedDelivery, log *slog.Logger) {
	if err := r.cfg.Deliveries.ReleaseLease(context.WithoutCancel(ctx), l.Delivery, l.LeaseUntil); err != nil {
		log.WarnContext(ctx, "release lease", "error", err)
	}
}

// observed is an attempt made and recorded, as observe reports it.
type observed struct {
	// delivery is the attempt's delivery as leased.
	delivery store.Delivery
	// attempt is the attempt's task.
	attempt queue.Attempt
	// record is what was recorded of it.
	record store.AttemptRecord
	// result is its exchange's.
	result Result
	// developer is a delivery to a `webhookd listen` listener.
	developer bool
}

// observe updates the metrics and logs the attempt's outcome, and tells the
// Notifier of a real delivery that failed for good. A developer's
// delivery (to a `webhookd listen` listener) is only logged: a handler
// being written on a laptop fails often, and must neither move the
// operators' metrics and alerts nor send the merchant failure e-mails.
func (r *Runner) observe(ctx context.Context, log *slog.Logger, o observed) {
	del, at, rec, res, developer := o.delivery, o.attempt, o.record, o.result, o.developer
	attrs := []any{"outcome", res.outcome, "duration_ms", rec.Attempt.DurationMS, "trigger", at.Trigger}
	if res.HTTPStatus != nil {
		attrs = append(attrs, "http_status", *res.HTTPStatus)
	}
	if res.ErrCode != nil {
		attrs = append(attrs, "error", *res.ErrCode)
	}
	if res.cause != nil {
		// The failure in its own words, for the operator: the record has
		// the merchant's.
		attrs = append(attrs, "cause", res.cause.Error())
	}
	if res.ErrCode != nil && *res.ErrCode == errOAuthToken && !del.Test && !developer {
		if n, ok := r.cfg.Notifier.(TokenNotifier); ok {
			n.TokenFailed(context.WithoutCancel(ctx), del, res.Body)
		}
	}
	switch rec.Status {
	case store.DeliverySucceeded:
		if at.Trigger == store.TriggerScheduled && !developer {
			from := del.EventCreatedAt
			if del.DeliverAt != nil {
				from = *del.DeliverAt // a scheduled event's wait is no latency
			}
			r.observeLatency(ctx, res.Finished.Sub(from).Seconds())
		}
		log.InfoContext(ctx, "delivery succeeded", attrs...)
	case store.DeliveryPending:
		if !developer {
			r.metrics.RetriesScheduled.Inc()
		}
		log.InfoContext(ctx, "attempt failed; retry scheduled", append(attrs, "next_attempt_at", rec.NextAttemptAt)...)
	case store.DeliverySkipped:
		log.InfoContext(ctx, "delivery cancelled by the subscription's transformation", attrs...)
	case store.DeliveryFailed:
		if rec.DisableSubscription && !del.Test {
			attrs = append(attrs, "subscription_disabled", true)
		}
		log.WarnContext(ctx, "delivery failed", attrs...)
		if !del.Test && !developer {
			r.metrics.DeliveriesFailed.Inc()
			if r.cfg.Notifier != nil {
				del.Status, del.AttemptCount, del.NextAttemptAt = store.DeliveryFailed, at.Number, nil
				del.Attempts = []store.Attempt{rec.Attempt} // the last attempt, for its error and status
				r.cfg.Notifier.DeliveryFailed(context.WithoutCancel(ctx), del)
				if g, ok := r.cfg.Notifier.(GoneNotifier); ok && rec.DisableSubscription {
					g.EndpointGone(context.WithoutCancel(ctx), del)
				}
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

// dropSubscription is dropWork for a subscription an attempt found deleted
// or disabled: the rest of its work leaves the schedule now rather than
// come up attempt by attempt to be abandoned.
func (r *Runner) dropSubscription(ctx context.Context, merchantID string, subscriptionID uuid.UUID, log *slog.Logger) {
	dropper := &Dropper{lanes: r.tasks.Lanes, store: r.cfg.Deliveries, clock: r.clock, logger: log}
	parked, ended, err := dropper.dropWork(ctx, merchantID, subscriptionID)
	if err != nil {
		log.WarnContext(ctx, "drop the subscription's waiting work; each attempt ends when it comes up", "error", err)
	}
	if parked > 0 || ended > 0 {
		log.InfoContext(ctx, "subscription deleted or disabled; its waiting work dropped", "parked", parked, "deliveries", ended)
	}
}
