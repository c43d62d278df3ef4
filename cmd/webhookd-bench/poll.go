package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/receiver"
)

// The poll scenario's defaults.
const (
	pollEvents  = 20000
	pollPollers = 4
	pollPayload = 1024
	// pollLimit is each read's page: 100 items of a 1 KiB payload stay
	// well under the bench client's 1 MiB answer bound.
	pollLimit = 100
	// pollWait is each read's long-polling wait, under the client's
	// timeout.
	pollWait = 5
)

// pollScenario is reading instead of receiving (issue 28): one merchant
// with 4 poll subscriptions, one per poller, each poller reading its own
// subscription's line with long polling (wait=5, 100 per page) and moving
// on with each page's iterator, which acknowledges the page before, while
// events are published in batches of 100. Every event reaches the 4
// lines, so the pollers read 4 × events items in all. One line per poller
// is what 4 concurrent pollers mean: 4 readers of one line would each read
// the same pages (an iterator is a position, not a lease), which is no
// more throughput; 4 consumers that each need every event are what a
// merchant runs. Each item's signature is checked with package receiver.
// The figures are items read per second, from the first publish to the
// last item read, and the CPU of each party per item read.
func pollScenario(ctx context.Context, l *lab) (*report, error) {
	events := orDefault(l.cfg.events, pollEvents)
	pollers := orDefault(l.cfg.subscriptions, pollPollers)
	payload := orDefault(l.cfg.payload, pollPayload)
	r := &report{scenario: "poll", params: fmt.Sprintf("%d events × %d poll subscriptions, one poller each (long polling, wait=%d s, %d per page, acknowledging by iterator), %d B payout payload, published in batches of %d",
		events, pollers, pollWait, pollLimit, payload, l.cfg.batch)}
	merchant := l.cfg.merchant + "-poll"
	key, err := l.eng.issueKey(ctx, merchant)
	if err != nil {
		return r, err
	}
	subs := make([]subscription, pollers)
	for i := range subs {
		if subs[i], err = l.eng.createSubscriptionWith(ctx, key, map[string]any{"destination": map[string]any{"type": "poll"}}); err != nil {
			return r, err
		}
	}
	defer func() {
		for _, s := range subs {
			if err := l.eng.deleteSubscription(context.WithoutCancel(ctx), key, s.ID); err != nil {
				l.logf("poll clean-up: %v", err)
			}
		}
	}()

	runCtx, cancel := context.WithTimeout(ctx, l.cfg.duration)
	defer cancel()
	want := int64(events)
	var read, bad atomic.Int64
	var lastRead atomic.Int64 // unix nanoseconds of the last item read
	var published time.Duration
	errs := make(chan error, pollers+1)
	var wg sync.WaitGroup
	before, err := l.meter.sampleCPU(ctx)
	if err != nil {
		return r, err
	}
	start := time.Now()
	for _, s := range subs {
		wg.Go(func() {
			n, b, err := pollLine(runCtx, l.eng, key, s, want, &lastRead)
			read.Add(n)
			bad.Add(b)
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Go(func() {
		if err := publishPolled(runCtx, l, merchant, events, payload); err != nil {
			errs <- err
			cancel()
		}
		published = time.Since(start)
	})
	wg.Wait()
	after, err := l.meter.sampleCPU(ctx)
	if err != nil {
		return r, err
	}
	close(errs)
	if err := <-errs; err != nil {
		return r, err
	}
	total := read.Load()
	took := time.Unix(0, lastRead.Load()).Sub(start)
	r.add("publish_s", published.Seconds(), "s")
	r.add("read_s", took.Seconds(), "s")
	r.add("items_read", total, "items")
	r.add("items_expected", want*int64(pollers), "items")
	r.add("signatures_refused", bad.Load(), "items")
	if took > 0 {
		r.add("items_read_per_s", float64(total)/took.Seconds(), "items/s")
		r.add("events_per_s", float64(events)/took.Seconds(), "events/s")
	}
	l.meter.reportCPU(r, after.sub(before), total)
	r.note("per_delivery figures are per item read: each event is one delivery to each of the %d lines", pollers)
	r.target("every item read, signature valid", "all", total == want*int64(pollers) && bad.Load() == 0)
	return r, nil
}

// publishPolled publishes the scenario's events in batches.
func publishPolled(ctx context.Context, l *lab, merchant string, events, payload int) error {
	for start := 0; start < events; start += l.cfg.batch {
		evs := make([]event, 0, l.cfg.batch)
		for i := start; i < min(events, start+l.cfg.batch); i++ {
			evs = append(evs, event{ID: uuid.NewString(), MerchantID: merchant, Type: benchEventType,
				Payload: payoutPayload(merchant, i, payload)})
		}
		if err := l.eng.publishBatch(ctx, evs); err != nil {
			return fmt.Errorf("poll: publish: %w", err)
		}
	}
	return nil
}

// pollItem is what the poller reads of an item.
type pollItem struct {
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Signature string `json:"signature"`
	Body      string `json:"body"`
}

// pollLine reads sub's line until want items were read or ctx ends, and
// acknowledges the last page. It returns the items read and how many of
// them failed verification.
func pollLine(ctx context.Context, eng *engine, key string, sub subscription, want int64, lastRead *atomic.Int64) (read, bad int64, err error) {
	v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{sub.Secret}})
	if err != nil {
		return 0, 0, err
	}
	header := http.Header{"Authorization": {"Bearer " + key}}
	iterator := ""
	for read < want {
		q := url.Values{"limit": {strconv.Itoa(pollLimit)}, "wait": {strconv.Itoa(pollWait)}}
		if iterator != "" {
			q.Set("iterator", iterator)
		}
		var page struct {
			Data     []pollItem `json:"data"`
			Iterator string     `json:"iterator"`
		}
		if err := eng.do(ctx, http.MethodGet, eng.api+"/v1/webhook_subscriptions/"+sub.ID+"/poll?"+q.Encode(), header, nil, &page); err != nil {
			return read, bad, fmt.Errorf("poll %s after %d items: %w", sub.ID, read, err)
		}
		for _, it := range page.Data {
			if v.VerifyValues(it.ID, it.Timestamp, it.Signature, []byte(it.Body)) != nil {
				bad++
			}
		}
		read += int64(len(page.Data))
		if len(page.Data) > 0 {
			for now := time.Now().UnixNano(); ; {
				prev := lastRead.Load()
				if now <= prev || lastRead.CompareAndSwap(prev, now) {
					break
				}
			}
		}
		iterator = page.Iterator
	}
	// Acknowledge the last page, as a merchant's next read would.
	q := url.Values{"limit": {"1"}, "iterator": {iterator}}
	if err := eng.do(ctx, http.MethodGet, eng.api+"/v1/webhook_subscriptions/"+sub.ID+"/poll?"+q.Encode(), header, nil, nil); err != nil {
		return read, bad, fmt.Errorf("poll %s: acknowledge the last page: %w", sub.ID, err)
	}
	return read, bad, nil
}
