package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// defaultPublishers is -publishers' default for most scenarios.
const defaultPublishers = 8

// loadGen is the bench's load generator: it publishes a plan's events
// through the engine's internal ingest API, as the core API would, paced
// or as fast as accepted, and logs each event's publish instant for the
// receivers to time its arrival against.
type loadGen struct {
	eng *engine
	// publishers is -publishers (0: the scenario's default).
	publishers int
}

// publishersFor is -publishers, else the scenario's default def, else
// defaultPublishers.
func (g *loadGen) publishersFor(def int) int {
	return orDefault(g.publishers, orDefault(def, defaultPublishers))
}

// payloadFor builds an event payload of about size bytes.
func payloadFor(run string, seq, size int) json.RawMessage {
	head := `{"bench":` + strconv.Quote(run) + `,"seq":` + strconv.Itoa(seq) + `,"pad":"`
	const tail = `"}`
	pad := max(size-len(head)-len(tail), 0)
	return json.RawMessage(head + strings.Repeat("x", pad) + tail)
}

// publishPlan is what to publish and how fast.
type publishPlan struct {
	events    int
	merchant  func(i int) string
	payload   int
	rate      float64 // events/s; 0: as fast as the engine accepts
	batch     int
	run       string
	deadline  time.Time
	log       *publishLog
	publisher int
	// orderKeys, when positive, gives each event payload.key, one of that
	// many keys in turn (the ordered scenario).
	orderKeys int
	// payloadOf, when set, builds the payloads instead of payloadFor.
	payloadOf func(run string, seq, size int) json.RawMessage
}

// publishStats is the publish side of a run.
type publishStats struct {
	start, end time.Time
	published  int
	failed     int
	batched    bool
	firstErr   error
	ok         []bool   // by event index: accepted by the engine
	ids        []string // by event index: the event's id
}

// publish sends the plan's events with plan.publisher concurrent requests,
// paced when plan.rate is set. Each event's publish instant is logged just
// before its request leaves. A failed request is retried (the event ids make
// that idempotent) up to three times.
func (g *loadGen) publish(ctx context.Context, p publishPlan) publishStats {
	ids := make([]string, p.events)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7()).String()
	}
	type job struct{ from, to int }
	jobs := make(chan job, 1024)
	st := publishStats{ok: make([]bool, p.events), ids: ids}
	var mu sync.Mutex
	var noBatch atomic.Bool
	st.start = time.Now()
	var wg sync.WaitGroup
	for range p.publisher {
		wg.Go(func() {
			for j := range jobs {
				evs := make([]event, 0, j.to-j.from)
				for i := j.from; i < j.to; i++ {
					var payload json.RawMessage
					switch {
					case p.orderKeys > 0:
						payload = keyedPayloadFor(p.run, i, p.payload, i%p.orderKeys)
					case p.payloadOf != nil:
						payload = p.payloadOf(p.run, i, p.payload)
					default:
						payload = payloadFor(p.run, i, p.payload)
					}
					evs = append(evs, event{ID: ids[i], MerchantID: p.merchant(i), Type: benchEventType, Payload: payload})
				}
				now := time.Now()
				for _, ev := range evs {
					p.log.record(ev.ID, now)
				}
				err := g.send(ctx, evs, &noBatch)
				mu.Lock()
				if err != nil {
					st.failed += len(evs)
					if st.firstErr == nil {
						st.firstErr = err
					}
				} else {
					st.published += len(evs)
					for i := j.from; i < j.to; i++ {
						st.ok[i] = true
					}
				}
				mu.Unlock()
			}
		})
	}
	step := max(p.batch, 1)
dispatch:
	for from := 0; from < p.events; from += step {
		if p.rate > 0 {
			due := st.start.Add(time.Duration(float64(from) / p.rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					break dispatch
				}
			}
		}
		if time.Now().After(p.deadline) || ctx.Err() != nil {
			break
		}
		jobs <- job{from, min(from+step, p.events)}
	}
	close(jobs)
	wg.Wait()
	st.end = time.Now()
	st.batched = step > 1 && !noBatch.Load()
	return st
}

// send publishes evs in one batch request (or one request per event when
// the engine has no batch route, remembered in noBatch), retried with a
// growing pause up to three times: the event ids make a retry idempotent.
func (g *loadGen) send(ctx context.Context, evs []event, noBatch *atomic.Bool) error {
	var err error
	for try := range 4 {
		if try > 0 {
			select {
			case <-time.After(time.Duration(try*try) * 100 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if len(evs) > 1 && !noBatch.Load() {
			err = g.eng.publishBatch(ctx, evs)
			if errors.Is(err, errNoBatch) {
				noBatch.Store(true)
			}
		}
		if len(evs) == 1 || noBatch.Load() {
			err = nil
			for _, ev := range evs {
				if e := g.eng.publish(ctx, ev); e != nil {
					err = e
				}
			}
		}
		if err == nil {
			return nil
		}
	}
	return err
}
