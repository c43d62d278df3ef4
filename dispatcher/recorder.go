package dispatcher

import (
	"context"
	"errors"
	"sync"

	"github.com/webhookd/webhookd/store"
)

// maxRecordBatch bounds one group commit: big enough to amortise the
// commit over hundreds of attempts, small enough to keep one statement's
// arrays and locks modest.
const maxRecordBatch = 500

// batchRecorder is the group commit of attempt records (river's
// BatchCompleter is the model). Workers hand it their records and wait;
// one writer takes whatever has queued up while the previous batch was
// committing and writes it in one statement. A record is acknowledged
// only once its batch has committed, so the durability of RecordAttempt is
// kept: the task is still acknowledged after its attempt is in Postgres.
//
// One writer, not several: batches that touch the same subscriptions'
// health rows in different orders could deadlock each other.
type batchRecorder struct {
	store *store.Store
	queue chan recordRequest
	stop  chan struct{}
	once  sync.Once
	done  sync.WaitGroup
}

type recordRequest struct {
	rec    store.AttemptRecord
	result chan error
}

var _ Recorder = (*batchRecorder)(nil)

func newBatchRecorder(st *store.Store) *batchRecorder {
	b := &batchRecorder{store: st, queue: make(chan recordRequest, maxRecordBatch), stop: make(chan struct{})}
	b.done.Add(1)
	go b.run()
	return b
}

// RecordAttempt queues the record and waits until its batch committed.
func (b *batchRecorder) RecordAttempt(ctx context.Context, r store.AttemptRecord) error {
	req := recordRequest{rec: r, result: make(chan error, 1)}
	select {
	case b.queue <- req:
	case <-b.stop:
		return errRecorderClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, the record is written whatever the caller's context
	// says; waiting for it keeps the ack after the commit.
	return <-req.result
}

var errRecorderClosed = errors.New("attempt recorder closed")

// close stops accepting records, writes what is queued and returns.
func (b *batchRecorder) close() {
	b.once.Do(func() { close(b.stop) })
	b.done.Wait()
}

func (b *batchRecorder) run() {
	defer b.done.Done()
	batch := make([]recordRequest, 0, maxRecordBatch)
	for {
		select {
		case req := <-b.queue:
			batch = append(batch[:0], req)
		case <-b.stop:
			// Drain what was queued before stop.
			for {
				select {
				case req := <-b.queue:
					b.write([]recordRequest{req})
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < maxRecordBatch {
			select {
			case req := <-b.queue:
				batch = append(batch, req)
			default:
				break fill
			}
		}
		b.write(batch)
	}
}

// write commits one batch and answers every waiting worker.
func (b *batchRecorder) write(batch []recordRequest) {
	recs := make([]store.AttemptRecord, len(batch))
	for i, req := range batch {
		recs[i] = req.rec
	}
	errs, err := b.store.RecordAttempts(context.Background(), recs)
	for i, req := range batch {
		if err != nil {
			req.result <- err
			continue
		}
		req.result <- errs[i]
	}
}
