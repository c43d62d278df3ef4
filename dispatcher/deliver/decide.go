package deliver

import (
	"time"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/retry"
)

// decide applies the retry policy to an attempt's result: the attempt row
// and the state it leaves the delivery in. It is pure: the schedule, the
// jitter and the times it reads come in as arguments. schedule is the
// engine's; a delivery that keeps a policy of its own (del.RetryPolicy,
// taken at its first attempt) follows that one's schedule instead.
func decide(schedule retry.Schedule, jitter float64, del store.Delivery, at queue.Attempt, res Result) store.AttemptRecord {
	schedule = scheduleOf(schedule, del)
	status := store.AttemptFailed
	if res.OK() {
		status = store.AttemptSucceeded
	}
	rec := store.AttemptRecord{
		Delivery: del,
		Attempt: store.Attempt{DeliveryID: del.ID, Number: at.Number, Status: status, Trigger: at.Trigger,
			HTTPStatus: res.HTTPStatus, Error: res.ErrCode, DurationMS: int(res.Duration.Milliseconds()),
			ResponseBody: res.Body, AttemptedAt: res.Started, RequestHeaders: res.Headers,
			TransformationVersion: res.transformation, RequestBody: res.sentBody},
	}
	switch {
	case res.OK():
		rec.Status = store.DeliverySucceeded
	case res.skipped:
		// Cancelled by the transformation: nothing was sent, nothing is
		// retried, and the endpoint's health does not count it.
		rec.Attempt.Status, rec.Status = store.AttemptSkipped, store.DeliverySkipped
	case res.final:
		rec.Status = store.DeliveryFailed
	case res.gone():
		// 410 Gone: the receiver asks for no more webhooks (Standard
		// Webhooks); the subscription is disabled, the delivery ends.
		rec.Status = store.DeliveryFailed
		rec.DisableSubscription = true
	case at.Trigger == store.TriggerManual:
		return decideManual(schedule, del, at, rec)
	default:
		next, ok := schedule.NextAttempt(at.Number, res.Finished, jitter)
		if !ok {
			rec.Status = store.DeliveryFailed
			break
		}
		next = pushBack(res.Finished, next, res.retryAfter)
		rec.Status = store.DeliveryPending
		rec.NextAttemptAt = &next
	}
	return rec
}

// decideManual is the state a failed manual attempt leaves (see
// Redeliverer.Redeliver): a manual attempt is one attempt and does not
// restart the schedule. A pending delivery keeps its next scheduled attempt
// at the time it was planned for, unless the manual attempt used up the
// schedule's last one; any other delivery ends failed (DESIGN.md: "a
// manual attempt failed").
func decideManual(schedule retry.Schedule, del store.Delivery, at queue.Attempt, rec store.AttemptRecord) store.AttemptRecord {
	rec.Status = store.DeliveryFailed
	if del.Status != store.DeliveryPending || del.NextAttemptAt == nil || at.Number >= schedule.Attempts() {
		return rec
	}
	next := *del.NextAttemptAt
	rec.Status, rec.NextAttemptAt = store.DeliveryPending, &next
	return rec
}

// pushBack honours a receiver's Retry-After (429, 503): the next attempt
// moves back by that much, but never beyond twice the scheduled delay, so
// a receiver cannot park its deliveries for days.
func pushBack(now, next time.Time, retryAfter time.Duration) time.Time {
	scheduled := next.Sub(now)
	if retryAfter <= scheduled {
		return next
	}
	return now.Add(min(retryAfter, 2*scheduled))
}

// scheduleOf is the schedule a delivery follows: the one of the policy it
// keeps, or the engine's when it keeps none or one without a schedule.
func scheduleOf(engine retry.Schedule, del store.Delivery) retry.Schedule {
	if delays := del.RetryPolicy.Delays(); delays != nil {
		return retry.Schedule{Delays: delays}
	}
	return engine
}

// attemptTimeout is how long one attempt of leased may take: its policy's
// timeout when it keeps one, but never more than the engine's
// (WEBHOOKD_DELIVERY_TIMEOUT), which the lease's length and the
// workers' drain on shutdown are sized for.
func attemptTimeout(engine time.Duration, leased store.LeasedDelivery) time.Duration {
	if t := leased.RetryPolicy.Timeout(); t > 0 {
		return min(t, engine)
	}
	return engine
}
