// Package groupcommit writes many callers' requests with one statement:
// the publishes, leases and attempt records of the delivery pipeline each
// go through one Batcher.
package groupcommit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
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
// Under heavy load batches grow by themselves. Under light load a batch is
// one request, unless the Batcher lingers (NewLingering).
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
	linger  Linger[Req]
}

// Linger makes a Batcher wait a little for company when requests come
// often but one at a time: at a light rate every request would otherwise
// pay a statement and a commit of its own. It waits only where the wait
// buys a larger batch: when the requests of late came closer together than
// Wait (so that another one is expected within it), the batch is smaller
// than Below (a larger one shares its commit already), and no request in
// it is Urgent. It waits until the batch reaches Below or Wait has passed
// since the writer took it.
type Linger[Req any] struct {
	// Wait is the longest a batch waits; 0 never waits.
	Wait time.Duration
	// Below is the batch size from which it is written at once.
	Below int
	// Urgent marks a request that must not wait (one whose caller holds
	// up others until it is written); nil marks none.
	Urgent func(Req) bool
	// Clock times the requests' arrivals (the wait itself is a timer);
	// nil is the system clock.
	Clock clock.Clock
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
	return NewLingering(write, Linger[Req]{})
}

// NewLingering is New with a Batcher that lingers as linger says.
func NewLingering[Req, Res any](write func(context.Context, []Req) ([]Res, []error, error), linger Linger[Req]) *Batcher[Req, Res] {
	b := &Batcher[Req, Res]{write: write, queue: make(chan batchRequest[Req, Res], MaxBatch), stop: make(chan struct{}), linger: linger}
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
	now := clock.Or(b.linger.Clock).Now
	pace := arrivals{ceiling: 4 * b.linger.Wait}
	// Only a Batcher that lingers times its requests' arrivals.
	seen := func() {}
	if b.linger.Wait > 0 {
		seen = func() { pace.seen(now()) }
	}
	for {
		select {
		case r := <-b.queue:
			batch = append(batch[:0], r)
			seen()
		case <-b.stop:
			b.drain()
			return
		}
	fill:
		for len(batch) < MaxBatch {
			select {
			case r := <-b.queue:
				batch = append(batch, r)
				seen()
			default:
				break fill
			}
		}
		if b.lingers(batch, pace) {
			batch = b.gather(batch, seen)
		}
		b.flush(batch)
	}
}

// drain writes what is queued once Close has stopped the writer.
func (b *Batcher[Req, Res]) drain() {
	for {
		select {
		case r := <-b.queue:
			b.flush([]batchRequest[Req, Res]{r})
		default:
			return
		}
	}
}

// lingers reports whether batch should wait for company (see Linger).
func (b *Batcher[Req, Res]) lingers(batch []batchRequest[Req, Res], pace arrivals) bool {
	if b.linger.Wait <= 0 || len(batch) >= b.lingerBelow() || !pace.closerThan(b.linger.Wait) {
		return false
	}
	return !slices.ContainsFunc(batch, b.urgent)
}

// lingerBelow is the batch size that ends a wait.
func (b *Batcher[Req, Res]) lingerBelow() int { return min(b.linger.Below, MaxBatch) }

// urgent reports whether r must not wait (Linger.Urgent).
func (b *Batcher[Req, Res]) urgent(r batchRequest[Req, Res]) bool {
	return b.linger.Urgent != nil && b.linger.Urgent(r.req)
}

// gather adds to batch what comes within the linger's Wait, until the
// batch reaches Below, an urgent request comes or Close is called; seen
// times each arrival.
func (b *Batcher[Req, Res]) gather(batch []batchRequest[Req, Res], seen func()) []batchRequest[Req, Res] {
	timer := time.NewTimer(b.linger.Wait)
	defer timer.Stop()
	for len(batch) < b.lingerBelow() {
		select {
		case r := <-b.queue:
			batch = append(batch, r)
			seen()
			if b.urgent(r) {
				return batch
			}
		case <-timer.C:
			return batch
		case <-b.stop:
			return batch
		}
	}
	return batch
}

// arrivals is the writer's running estimate of the time between requests:
// an average that follows a change of rate within a few requests.
type arrivals struct {
	// ceiling bounds one gap: an idle hour counts as no more, so that the
	// average comes down within a few requests once they come often again.
	ceiling time.Duration
	last    time.Time
	gap     time.Duration
	// known is whether two requests have come: one says nothing of the
	// next.
	known bool
}

// seen counts a request that came at now.
func (a *arrivals) seen(now time.Time) {
	if !a.last.IsZero() {
		gap := min(now.Sub(a.last), a.ceiling)
		if a.known {
			gap = (3*a.gap + gap) / 4
		}
		a.gap, a.known = gap, true
	}
	a.last = now
}

// closerThan reports whether requests have come less than d apart of late.
func (a arrivals) closerThan(d time.Duration) bool { return a.known && a.gap < d }

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
