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
	head, err := r.cfg.Store.LineHead(ctx, ended.SubscriptionID, *ended.OrderingKey)
	if errors.Is(err, store.ErrNotFound) {
		return // the key is idle
	}
	if err != nil {
		log.WarnContext(ctx, "read the next delivery of the key; the sweeper will enqueue it", "error", err)
		return
	}
	var due = r.clock.Now()
	if head.NextAttemptAt != nil {
		due = *head.NextAttemptAt
	}
	number := head.AttemptCount + 1
	if _, err := r.tasks.Schedule(ctx, queue.ScheduledAttempt(head, number, due), queue.AttemptTaskID(head.ID, number)); err != nil {
		log.WarnContext(ctx, "enqueue the next delivery of the key; the sweeper will", "error", err, "next_delivery_id", head.ID)
	}
}
