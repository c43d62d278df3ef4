package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// subscriptionCreators is how many subscriptions a fleet creates (and
// deletes) at once.
const subscriptionCreators = 16

// fleet is the receivers and the engine-side merchants and subscriptions of
// one scenario.
type fleet struct {
	rcv       *receivers
	log       *publishLog
	merchants []string // merchant of each subscription, by index
	keys      map[string]string
	subIDs    []string
}

// healthyMerchants lists the merchants none of whose endpoints hang.
func (f *fleet) healthyMerchants() []string {
	hanging := map[string]bool{}
	for i, m := range f.merchants {
		if f.rcv.endpoints[i].hang {
			hanging[m] = true
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range f.merchants {
		if !hanging[m] && !seen[m] {
			out = append(out, m)
			seen[m] = true
		}
	}
	return out
}

// healthyPerMerchant counts, by merchant, the subscriptions whose endpoint
// answers: the deliveries one event of that merchant should complete.
func (f *fleet) healthyPerMerchant() map[string]int64 {
	out := map[string]int64{}
	for i, m := range f.merchants {
		if !f.rcv.endpoints[i].hang {
			out[m]++
		}
	}
	return out
}

// distinctMerchants lists the merchants in order of first appearance.
func (f *fleet) distinctMerchants() []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range f.merchants {
		if !seen[m] {
			out = append(out, m)
			seen[m] = true
		}
	}
	return out
}

// fleetMaker sets fleets up before a scenario and tears them down after
// it: the bench's receivers on 127.0.0.1, and the merchants, API keys and
// subscriptions the engine delivers to them.
type fleetMaker struct {
	eng *engine
	// listeners is -listeners: at most this many receiver ports.
	listeners int
	logf      progress
}

// setUp starts subs receivers and subscribes each one, on behalf of
// merchants[i] (or the single merchant when merchants has one entry).
// urlOverride, when set, replaces every receiver URL (a closed port).
// capacity is how many publish instants the fleet's log holds.
func (m *fleetMaker) setUp(ctx context.Context, merchants []string, subs, hanging int, urlOverride string, capacity int) (*fleet, error) {
	return m.setUpOn(ctx, merchants, subs, hanging, urlOverride, capacity, m.listeners)
}

// setUpOn is setUp with the receivers on at most listeners ports.
func (m *fleetMaker) setUpOn(ctx context.Context, merchants []string, subs, hanging int, urlOverride string, capacity, listeners int) (*fleet, error) {
	return m.setUpWith(ctx, merchants, subs, hanging, urlOverride, capacity, listeners, endpointShape{})
}

// endpointShape is how a scenario's subscriptions and receivers differ from
// plain HTTP ones (mtls.go, jwe.go, broker.go). The zero value is plain HTTP.
type endpointShape struct {
	receiving receiverOptions
	// fields, when set, are subscription i's create fields beside events
	// and description, given its receiver's URL (default: {"url": url}).
	fields func(i int, url string) map[string]any
}

// setUpWith is setUpOn with the subscriptions and receivers shaped by shape.
func (m *fleetMaker) setUpWith(ctx context.Context, merchants []string, subs, hanging int, urlOverride string, capacity, listeners int, shape endpointShape) (*fleet, error) {
	log := newPublishLog(capacity)
	rcv, err := startReceiversWith(subs, hanging, listeners, log, shape.receiving)
	if err != nil {
		return nil, err
	}
	f := &fleet{rcv: rcv, log: log, keys: map[string]string{}, subIDs: make([]string, subs)}
	for i := range subs {
		f.merchants = append(f.merchants, merchants[i%len(merchants)])
	}
	// Keys in parallel too: a fleet of thousands of merchants (scale.go)
	// would otherwise wait on one request at a time.
	distinct := f.distinctMerchants()
	keys := make([]string, len(distinct))
	err = inParallel(len(distinct), subscriptionCreators, func(i int) error {
		var err error
		keys[i], err = m.eng.issueKey(ctx, distinct[i])
		return err
	})
	if err != nil {
		rcv.close()
		return nil, err
	}
	for i, merchant := range distinct {
		f.keys[merchant] = keys[i]
	}
	err = inParallel(subs, subscriptionCreators, func(i int) error {
		url := rcv.endpoints[i].url
		if urlOverride != "" {
			url = urlOverride
		}
		fields := map[string]any{"url": url}
		if shape.fields != nil {
			fields = shape.fields(i, url)
		}
		s, err := m.eng.createSubscriptionWith(ctx, f.keys[f.merchants[i]], fields)
		if err == nil {
			err = rcv.setSecret(i, s.Secret)
		}
		if err != nil {
			return err
		}
		f.subIDs[i] = s.ID
		return nil
	})
	if err != nil {
		m.tearDown(f)
		return nil, err
	}
	return f, nil
}

// tearDown deletes the subscriptions, so the engine stops retrying them,
// then closes the receivers.
func (m *fleetMaker) tearDown(f *fleet) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = inParallel(len(f.subIDs), subscriptionCreators, func(i int) error {
		if f.subIDs[i] == "" {
			return nil
		}
		key := f.keys[f.merchants[i]]
		err := m.eng.deleteSubscription(ctx, key, f.subIDs[i])
		if err != nil {
			// Deleting a subscription whose deliveries are being
			// attempted can fail (see BENCHMARKS.md); disabling it stops
			// them too.
			m.logf("clean-up: %v; disabling instead", err)
			err = m.eng.disableSubscription(ctx, key, f.subIDs[i])
		}
		if err != nil {
			m.logf("clean-up: %v", err)
		}
		return nil // clean-up goes on past a failure: each one is logged
	})
	f.rcv.close()
}

// inParallel calls do(i) for every i in [0, n) from at most workers
// goroutines, each taking the next index, and returns the first error; a
// worker stops at its error, the others go on.
func inParallel(n, workers int, do func(i int) error) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
