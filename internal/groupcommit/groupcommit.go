// Package groupcommit writes many callers' requests with one statement:
// the publishes, leases and attempt records of the delivery pipeline each
// go through one Batcher.
package groupcommit

import (
	"context"
	"errors"
	"sync"
	"time"
)

// MaxBatch bounds one group commit: big enough to amortise a statement and
// its commit over hundreds of attempts, small enough to keep one
// statement's arrays and locks modest.
const MaxBatch = 500

// batchTimeout bounds one batch's statement.
const batchTimeout = 30 * time.Second

// Batcher is group commit (river's BatchCompleter is the model): workers
// hand it a request and wait; one writer takes whatever queued up while
// the previous batch was being written and writes it with one statement.
// Nothing waits for a timer: under light load a batch is one request, under
// heavy load batches grow by themselves.
//
// One writer, not several: batches that touch the same rows (a
// subscription's health, say) in different orders could deadlock.
type Batcher[Req, Res any] struct {
	write func(context.Context, []Req) ([]Res, []error, error)
	queue chan batchRequest[Req, Res]
	stop  chan struct{}
	once  sync.Once
	done  sync.WaitGroup
	// sending is held (read) by every enqueue and taken (write) by Close
	// before it stops the writer, so that no request enters the queue
	// after the writer's last drain: it would wait for ever.
	sending sync.RWMutex
	closed  bool
}

type batchRequest[Req, Res any] struct {
	req    Req
	result chan batchResult[Res]
}

type batchResult[Res any] struct {
	res Res
	err error
}

// ErrClosed is what Do answers once the Batcher is closed.
var ErrClosed = errors.New("groupcommit: closed")

// New starts the writer. write gets a batch and returns one result
// and one error per request, or an error for the whole batch.
func New[Req, Res any](write func(context.Context, []Req) ([]Res, []error, error)) *Batcher[Req, Res] {
	b := &Batcher[Req, Res]{write: write, queue: make(chan batchRequest[Req, Res], MaxBatch), stop: make(chan struct{})}
	b.done.Add(1)
	go b.run()
	return b
}

// Do queues req and waits for its batch to be written. Once queued, the
// request is written whatever ctx says, and Do waits for it: a caller
// acknowledges its task only after its record is durable.
func (b *Batcher[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	r := batchRequest[Req, Res]{req: req, result: make(chan batchResult[Res], 1)}
	if err := b.enqueue(ctx, r); err != nil {
		var zero Res
		return zero, err
	}
	out := <-r.result
	return out.res, out.err
}

// enqueue queues r unless the Batcher is closed (ErrClosed) or ctx ends
// first (ctx's error).
func (b *Batcher[Req, Res]) enqueue(ctx context.Context, r batchRequest[Req, Res]) error {
	b.sending.RLock()
	defer b.sending.RUnlock()
	if b.closed {
		return ErrClosed
	}
	select {
	case b.queue <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DoAll is Do for several requests, queued in their order without waiting
// for one another, so that they share a batch (or follow one another in
// consecutive ones). It returns one result and one error per request; a
// request ctx ended before it was queued gets ctx's error, and those
// queued before are written and waited for all the same.
func (b *Batcher[Req, Res]) DoAll(ctx context.Context, reqs []Req) ([]Res, []error) {
	out := make([]Res, len(reqs))
	errs := make([]error, len(reqs))
	queued := make([]chan batchResult[Res], 0, len(reqs))
	for i, req := range reqs {
		r := batchRequest[Req, Res]{req: req, result: make(chan batchResult[Res], 1)}
		if errs[i] = b.enqueue(ctx, r); errs[i] == nil {
			queued = append(queued, r.result)
			continue
		}
		for j := i + 1; j < len(reqs); j++ {
			errs[j] = errs[i]
		}
		break
	}
	for i, result := range queued {
		got := <-result
		out[i], errs[i] = got.res, got.err
	}
	return out, errs
}

// Close stops accepting requests, writes what is queued and returns.
func (b *Batcher[Req, Res]) Close() {
	b.once.Do(func() {
		b.sending.Lock()
		b.closed = true
		b.sending.Unlock()
		close(b.stop)
	})
	b.done.Wait()
}

func (b *Batcher[Req, Res]) run() {
	defer b.done.Done()
	batch := make([]batchRequest[Req, Res], 0, MaxBatch)
	for {
		select {
		case r := <-b.queue:
			batch = append(batch[:0], r)
		case <-b.stop:
			for {
				select {
				case r := <-b.queue:
					b.flush([]batchRequest[Req, Res]{r})
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < MaxBatch {
			select {
			case r := <-b.queue:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		b.flush(batch)
	}
}

// flush writes one batch and answers every waiting caller.
func (b *Batcher[Req, Res]) flush(batch []batchRequest[Req, Res]) {
	reqs := make([]Req, len(batch))
	for i, r := range batch {
		reqs[i] = r.req
	}
	// A stalled database must not hold every waiting worker forever: the
	// batch fails, its attempts are retried, their leases lapse.
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	res, errs, err := b.write(ctx, reqs)
	for i, r := range batch {
		if err != nil {
			r.result <- batchResult[Res]{err: err}
			continue
		}
		r.result <- batchResult[Res]{res: res[i], err: errs[i]}
	}
}
