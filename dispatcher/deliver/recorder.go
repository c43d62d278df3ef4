package deliver

import (
	"context"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
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

// inlineRecorderStore is what the InlineRecorder needs of the database.
type inlineRecorderStore interface {
	// RecordAttempt writes one attempt's outcome.
	RecordAttempt(ctx context.Context, r store.AttemptRecord) error
	// RecordAttemptsNext writes many attempts' outcomes in one statement,
	// each with the delivery that now heads the ordered line it ended.
	RecordAttemptsNext(ctx context.Context, rs []store.AttemptRecord) ([]error, []*store.Delivery, error)
}

// InlineRecorder writes each record in its own transaction.
type InlineRecorder struct {
	// Store is the database.
	Store inlineRecorderStore
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

// The records of attempts ending one at a time, at a light rate, wait for
// one another up to recordLingerWait, until recordLingerBelow share a
// commit. Waiting costs no delivery any latency (its receiver has answered
// already); it delays when the API shows the outcome, and holds the
// attempt's pool slot a little longer (its merchant's and subscription's
// slots were given back when the exchange ended). A record that ends an
// ordered delivery never waits: the next delivery of its key starts when
// it is written.
//
// 40 ms and 32 took a tenth of a CPU millisecond per delivery off
// Postgres at 300 events/s against 10 ms and 8 (BENCHMARKS.md, November
// 28): a record statement carried about 4 records, then about 13. A
// batch waits only while smaller than recordLingerBelow, so the slots its
// records hold are fewer; NewBatchRecorder lowers it to an eighth of a
// small pool, which the wait must not leave idle.
const (
	recordLingerWait  = 40 * time.Millisecond
	recordLingerBelow = 32
)

// recordLingerShare is the part of the pool whose slots records waiting
// for company may hold: 1/recordLingerShare.
const recordLingerShare = 8

// batchRecorderStore is what the BatchRecorder needs of the database.
type batchRecorderStore interface {
	// RecordAttemptsNext writes many attempts' outcomes in one statement,
	// each with the delivery that now heads the ordered line it ended.
	RecordAttemptsNext(ctx context.Context, rs []store.AttemptRecord) ([]error, []*store.Delivery, error)
}

// NewBatchRecorder starts the writer for a pool of pool attempts (0: a
// pool of any size), which times arrivals by clock; Close stops it.
func NewBatchRecorder(st batchRecorderStore, clock clock.Clock, pool int) *BatchRecorder {
	return &BatchRecorder{b: groupcommit.NewLingering(func(ctx context.Context, recs []store.AttemptRecord) ([]*store.Delivery, []error, error) {
		errs, heads, err := st.RecordAttemptsNext(ctx, recs)
		return heads, errs, err
	}, groupcommit.Linger[store.AttemptRecord]{
		Wait:   recordLingerWait,
		Below:  recordLingerBelowFor(pool),
		Urgent: func(rec store.AttemptRecord) bool { return rec.Delivery.Sequence != nil },
		Clock:  clock,
	})}
}

// recordLingerBelowFor is the batch size that ends a wait in a pool of
// pool attempts: at most an eighth of it, so that no wait is had in a
// pool of under 16.
func recordLingerBelowFor(pool int) int {
	if pool <= 0 {
		return recordLingerBelow
	}
	return min(recordLingerBelow, pool/recordLingerShare)
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
