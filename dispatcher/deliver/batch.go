package deliver

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/receiver"
)

// batchIDPrefix starts a batch request's webhook-id, so that it can never
// be taken for an event id.
const batchIDPrefix = "batch_"

// runUnit makes what one take handed over in one slot: an attempt, or
// the attempts of a batched subscription taken together (queue/batch.go),
// which go in one request.
func (r *Runner) runUnit(ctx context.Context, it queue.LaneItem, held *heldSlots) {
	if len(it.Batch) == 0 && (it.Task.BatchSize <= 1 || it.Task.Trigger == store.TriggerManual) {
		r.runTaken(ctx, it, held)
		return
	}
	r.runBatch(ctx, it, held)
}

// batchMember is one delivery of a batch: its task and its lease.
type batchMember struct {
	item   queue.LaneItem
	leased store.LeasedDelivery
}

// runBatch makes one attempt of each delivery of a unit in one request:
// lease them all in one statement, send {"data": [<envelope>…]} signed
// under the batch's own id, and record for each an attempt with the same
// outcome and the batch's id. One answer decides for all: a 2xx settles
// every one; anything else is a failed attempt of each, which then waits
// for its own next attempt, when the schedule forms a batch again of what
// is due. A delivery that cannot go in a batch (its subscription deleted,
// disabled or no longer batched, a test delivery) is made alone, as
// runTaken makes it.
func (r *Runner) runBatch(ctx context.Context, unit queue.LaneItem, held *heldSlots) {
	items := append([]queue.LaneItem{{ID: unit.ID, Task: unit.Task}}, unit.Batch...)
	now := r.clock.Now()
	reqs := make([]store.LeaseRequest, len(items))
	for i, it := range items {
		reqs[i] = store.LeaseRequest{ID: it.Task.DeliveryID, CreatedAt: it.Task.CreatedAt, Number: it.Task.Number}
	}
	log := r.logger.With("subscription_id", unit.Task.SubscriptionID)
	leased, errs, err := r.cfg.Deliveries.LeaseDeliveries(ctx, reqs, now, r.cfg.LeaseFor)
	if err != nil {
		r.parkAgain(ctx, items, err, log)
		return
	}
	var members []batchMember
	var alone []queue.LaneItem
	for i, it := range items {
		switch l := leased[i]; {
		case errs[i] != nil:
			// Already attempted, finished, or running elsewhere: stale.
		case l.SubscriptionDeleted || l.SubscriptionStatus != store.SubscriptionEnabled || l.Test ||
			l.Batch == nil || !r.destinations.pool.Batches(subjectOf(&l)):
			// (A broker destination takes one message per delivery: a
			// batch is an HTTP request's shape, Metadata.Batches.)
			r.releaseLease(ctx, l, log)
			alone = append(alone, it)
		default:
			members = append(members, batchMember{item: it, leased: l})
		}
	}
	if len(members) > 0 {
		if err := r.sendBatch(ctx, members, held, log); err != nil {
			for _, m := range members {
				r.releaseLease(ctx, m.leased, log)
			}
			r.parkAgain(ctx, itemsOf(members), err, log)
		}
	}
	for _, it := range alone {
		r.runTaken(ctx, it, held)
	}
}

// sendBatch signs and sends the members' batch and records its outcome
// for each. An error is internal (the signing keys unreadable, Postgres
// unreachable before anything was sent): nothing was recorded.
func (r *Runner) sendBatch(ctx context.Context, members []batchMember, held *heldSlots, log *slog.Logger) error {
	first := members[0].leased
	now := r.clock.Now()
	// The batch body as a whole is encrypted (when the subscription has a
	// key) and signed: a receiver decrypts, verifies, then splits it.
	sig, err := r.secrets.Signing(ctx, first, now)
	if err != nil {
		return err
	}
	extra, err := r.secrets.Headers(first)
	if err != nil {
		return err
	}
	// Each member's transformation runs on its own body; one that
	// cancels or fails settles alone and leaves the batch. The request
	// goes where, and with the headers, the first transformation said.
	target := first.URL
	shapedOnce := false
	sent := members[:0:0]
	body := bytes.NewBufferString(`{"data":[`)
	for _, m := range members {
		b, err := BodyFor(m.leased)
		if err != nil {
			return err
		}
		if m.leased.TransformationVersion != nil {
			m.leased.Body = b
			out, ended, err := r.transforms.transformed(ctx, m.leased, maps.Clone(extra))
			if err != nil {
				return err
			}
			if ended != nil {
				r.settle(ctx, m, "", *ended)
				continue
			}
			b = out.body
			if !shapedOnce {
				target, extra, shapedOnce = out.target, out.headers, true
			}
		}
		if len(sent) > 0 {
			body.WriteByte(',')
		}
		body.Write(b)
		sent = append(sent, m)
	}
	body.WriteString(`]}`)
	if len(sent) == 0 {
		return nil
	}
	members = sent
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	batchID := batchIDPrefix + id.String()
	size := http.Header{}
	size.Set(receiver.HeaderBatchSize, strconv.Itoa(len(members)))
	res, err := r.destinations.send(ctx, outgoing{leased: &first, id: batchID, body: body.Bytes(), url: target, custom: extra,
		ordering: size, size: len(members)}, sig, r.secrets.credentials(&first))
	held.exchanged(err == nil && res.outcome == metrics.OutcomeTimeout)
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "batch sent", "batch_id", batchID, "size", len(members), "outcome", res.outcome)
	// Each outcome is recorded on its own, at once: the recorder's group
	// commit writes them in one statement.
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { r.settle(ctx, m, batchID, res) })
	}
	wg.Wait()
	return nil
}

// settle records one member's attempt, with the batch's id ("" for a
// member that left the batch: its transformation cancelled or failed),
// and does what follows it as attempt does: the line's next delivery,
// the next attempt.
func (r *Runner) settle(ctx context.Context, m batchMember, batchID string, res Result) {
	at, leased := m.item.Task, m.leased
	log := r.logger.With("event_id", leased.EventID, "delivery_id", leased.ID, "attempt", at.Number,
		"subscription_id", leased.SubscriptionID, "batch_id", batchID)
	rec := decide(r.cfg.Schedule, r.cfg.Jitter(), leased.Delivery, at, res)
	if batchID != "" {
		rec.Attempt.BatchID = &batchID
	}
	if !res.skipped {
		r.metrics.Attempts.WithLabelValues(res.outcome).Inc()
		r.metrics.AttemptDuration.Observe(res.Duration.Seconds())
	}
	head, err := r.record(context.WithoutCancel(ctx), rec, log)
	if err != nil {
		// Not recorded: the lease lapses and the sweeper parks the attempt
		// again, as for an attempt made alone.
		log.WarnContext(ctx, "record batched attempt", "error", err)
		return
	}
	r.observe(ctx, log, observed{delivery: leased.Delivery, attempt: at, record: rec, result: res})
	if endsLine(leased.Delivery, rec.Status) {
		r.nextInLine(ctx, leased.Delivery, head, nil, log)
	}
	if rec.NextAttemptAt != nil {
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queue.EnqueueTimeout)
		defer cancel()
		if _, err := r.tasks.Schedule(ectx, queue.ScheduledAttempt(leased.Delivery, at.Number+1, *rec.NextAttemptAt),
			queue.AttemptTaskID(leased.ID, at.Number+1)); err != nil {
			log.WarnContext(ctx, "enqueue next attempt; the sweeper will retry", "error", err)
		}
	}
}

// parkAgain puts a unit's attempts back on the schedule after an internal
// error, a second later: none of them counts as an attempt.
func (r *Runner) parkAgain(ctx context.Context, items []queue.LaneItem, cause error, log *slog.Logger) {
	if errors.Is(cause, context.Canceled) && ctx.Err() != nil {
		return // shutting down: the sweeper parks them once their leases lapse
	}
	log.WarnContext(ctx, "batch failed for an internal reason; scheduled again", "error", cause, "attempts", len(items))
	due := r.clock.Now().Add(time.Second)
	for i := range items {
		items[i].Task.Due = due
		items[i].Batch = nil
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queue.EnqueueTimeout)
	defer cancel()
	if _, err := r.tasks.Lanes.Push(ectx, items...); err != nil {
		log.WarnContext(ctx, "schedule the batch's attempts again; the sweeper will", "error", err)
	}
}

// itemsOf are the members' tasks.
func itemsOf(members []batchMember) []queue.LaneItem {
	out := make([]queue.LaneItem, len(members))
	for i, m := range members {
		out[i] = m.item
	}
	return out
}
