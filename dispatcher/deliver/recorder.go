package deliver

import (
	"context"

	"github.com/webhookd/webhookd/internal/groupcommit"
	"github.com/webhookd/webhookd/internal/store"
)

// Recorder writes the outcome of an attempt. It returns only once the
// record is durable: a task is acknowledged after its attempt is in
// Postgres, never before. An attempt number already recorded (a worker
// whose lease lapsed finished late) is store.ErrConflict.
//
// Two implementations, as river's job completer has: InlineRecorder writes
// each record in its own statement; BatchRecorder gathers the records of
// every attempt finishing meanwhile into one statement (group commit).
type Recorder interface {
	Record(ctx context.Context, rec store.AttemptRecord) error
}

// nextRecorder is a Recorder that also returns the delivery that now heads
// the ordered line a record ended (nil: none), read in the statement that
// moved the line, so that the worker hands it on without asking Postgres
// again.
type nextRecorder interface {
	RecordNext(ctx context.Context, rec store.AttemptRecord) (*store.Delivery, error)
}

// InlineRecorder writes each record in its own transaction.
type InlineRecorder struct {
	// Store is the database.
	Store *store.Store
}

// Record implements Recorder.
func (r InlineRecorder) Record(ctx context.Context, rec store.AttemptRecord) error {
	return r.Store.RecordAttempt(ctx, rec)
}

// RecordNext implements nextRecorder.
func (r InlineRecorder) RecordNext(ctx context.Context, rec store.AttemptRecord) (*store.Delivery, error) {
	errs, heads, err := r.Store.RecordAttemptsNext(ctx, []store.AttemptRecord{rec})
	if err != nil {
		return nil, err
	}
	return heads[0], errs[0]
}

// BatchRecorder is the group commit of attempt records: the durability of
// InlineRecorder at a fraction of the commits.
type BatchRecorder struct {
	b *groupcommit.Batcher[store.AttemptRecord, *store.Delivery]
}

// NewBatchRecorder starts the writer; Close stops it.
func NewBatchRecorder(st *store.Store) *BatchRecorder {
	return &BatchRecorder{b: groupcommit.New(func(ctx context.Context, recs []store.AttemptRecord) ([]*store.Delivery, []error, error) {
		errs, heads, err := st.RecordAttemptsNext(ctx, recs)
		return heads, errs, err
	})}
}

// Record implements Recorder: it queues the record and waits until its
// batch committed.
func (r *BatchRecorder) Record(ctx context.Context, rec store.AttemptRecord) error {
	_, err := r.b.Do(ctx, rec)
	return err
}

// RecordNext implements nextRecorder.
func (r *BatchRecorder) RecordNext(ctx context.Context, rec store.AttemptRecord) (*store.Delivery, error) {
	return r.b.Do(ctx, rec)
}

// Close writes what is queued and stops the writer.
func (r *BatchRecorder) Close() { r.b.Close() }
