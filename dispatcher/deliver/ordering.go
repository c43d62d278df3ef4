package deliver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/store"
)

// The headers of an ordered delivery: the value of its key, and its place
// among the deliveries of that key to the endpoint, 1, 2, 3... in publish
// order. A receiver that sees a sequence it has already handled has a
// redelivery; one that sees a gap knows an earlier delivery failed.
const (
	headerOrderingKey = "webhook-ordering-key"
	headerSequence    = "webhook-sequence"
)

// orderingHeaders are the headers an ordered delivery adds; nil for an
// unordered one.
func orderingHeaders(d store.Delivery) http.Header {
	if d.Sequence == nil || d.OrderingKey == nil {
		return nil
	}
	h := http.Header{}
	h.Set(headerOrderingKey, *d.OrderingKey)
	h.Set(headerSequence, strconv.FormatInt(*d.Sequence, 10))
	return h
}

// endsLine reports whether a delivery leaving status ends its place in an
// ordered line, so that the next delivery of its key may go.
func endsLine(d store.Delivery, status store.DeliveryStatus) bool {
	return d.Sequence != nil && d.OrderingKey != nil && status != store.DeliveryPending
}

// enqueueLineHead enqueues the delivery that now heads the line an ordered
// delivery ended, as the store made it due when it recorded the end. A
// lost enqueue (Redis down, a crash) is not lost work: the head is due in
// Postgres, and the sweeper enqueues it.
func (r *Runner) enqueueLineHead(ctx context.Context, ended store.Delivery, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queue.EnqueueTimeout)
	defer cancel()
	head, err := r.cfg.Deliveries.LineHead(ctx, ended.SubscriptionID, *ended.OrderingKey)
	if errors.Is(err, store.ErrNotFound) {
		return // the key is idle
	}
	if err != nil {
		log.WarnContext(ctx, "read the next delivery of the key; the sweeper will enqueue it", "error", err)
		return
	}
	r.handOn(ctx, &head, nil, log)
}

// handOn starts the attempt of head, the delivery that now heads the line
// an attempt just ended (read by the record that ended it; nil: the key is
// idle). Handed straight to the slot of the attempt that ended the line
// (held) when the scheduler would have given it one anyway (see
// heldSlots.handOff), it runs as soon as that attempt returns, without a
// trip through the schedule; else it is parked in the schedule as any
// attempt, where a rate limit paces it and a batch forms. Either way a
// crash loses nothing: the head is due in Postgres, and until a worker
// leases it the sweeper finds it.
func (r *Runner) handOn(ctx context.Context, head *store.Delivery, held *heldSlots, log *slog.Logger) {
	if head == nil {
		return
	}
	now := r.clock.Now()
	due := now
	if head.NextAttemptAt != nil && head.NextAttemptAt.After(now) {
		due = *head.NextAttemptAt
	}
	number := head.AttemptCount + 1
	it := queue.LaneItem{ID: queue.AttemptTaskID(head.ID, number), Task: queue.ScheduledAttempt(*head, number, due)}
	if held != nil && runsNow(it.Task, now) && held.handOff(it) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queue.EnqueueTimeout)
	defer cancel()
	if _, err := r.tasks.Schedule(ctx, it.Task, it.ID); err != nil {
		log.WarnContext(ctx, "enqueue the next delivery of the key; the sweeper will", "error", err, "next_delivery_id", head.ID)
	}
}

// nextInLine goes on with the line an attempt of ended just ended: head is
// the next delivery as the record read it; a recorder that reads none
// leaves it to a read of its own.
func (r *Runner) nextInLine(ctx context.Context, ended store.Delivery, head *store.Delivery, held *heldSlots, log *slog.Logger) {
	if _, reads := r.recorder.(nextRecorder); !reads {
		r.enqueueLineHead(ctx, ended, log)
		return
	}
	r.handOn(ctx, head, held, log)
}
