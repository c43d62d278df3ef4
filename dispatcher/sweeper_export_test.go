package dispatcher

import (
	"context"

	"github.com/google/uuid"
)

// SweepOnce runs one sweep of d's sweeper, as its periodic task does, and
// returns how many attempts it enqueued again: a test counts them without
// waiting for the period or running a worker that would take the tasks it
// arranged.
func SweepOnce(ctx context.Context, d *Dispatcher) (int, error) {
	w, err := newWorker(d)
	if err != nil {
		return 0, err
	}
	defer w.close()
	return w.sweeper.sweep(ctx)
}

// GroupTaskID is the id of the first-attempts task of the commit group a
// delivery was written in.
func GroupTaskID(deliveryID uuid.UUID) string { return groupTaskID(deliveryID) }
