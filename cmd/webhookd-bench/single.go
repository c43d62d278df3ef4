package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/webhookd/webhookd/catalogue"
)

// The single scenario's defaults (issue 19's W1).
const (
	singleEvents     = 20000
	singlePublishers = 32
	singlePayload    = 1024
)

// single measures the plainest workload at full rate: one merchant, one
// subscription, each event its own request from 32 concurrent publishers,
// a realistic payout payload. A run at full rate must not leave deliveries
// for the sweeper, so its re-queues are held against zero.
func (b *bench) single(ctx context.Context) (*report, error) {
	events := orDefault(b.cfg.events, singleEvents)
	subs := orDefault(b.cfg.subscriptions, 1)
	payload := orDefault(b.cfg.payload, singlePayload)
	r := &report{scenario: "single", params: fmt.Sprintf("%d events × %d subscription(s), %d B payout payload, one event per request, %d publishers, as fast as accepted",
		events, subs, payload, b.publishers(singlePublishers))}
	res, err := b.deliver(ctx, deliveryRun{name: "single", merchants: []string{b.cfg.merchant + "-single"},
		subs: subs, events: events, batch: 1, payload: payload, publishers: singlePublishers, payloadOf: payoutPayload})
	if err != nil {
		return r, err
	}
	b.reportDelivery(r, res)
	// deliveries_per_s runs to the last recorded attempt; this one to the
	// last arrival, what a merchant sees.
	if arrived := res.lastArrival.Sub(res.pub.start).Seconds(); !res.lastArrival.IsZero() && arrived > 0 {
		r.add("deliveries_per_s_to_last_arrival", float64(res.received)/arrived, "deliveries/s")
	}
	if res.requeuedOK {
		r.target("sweeper_requeued", "= 0", res.requeued == 0)
	}
	return r, nil
}

// payoutPayload is the catalogue's payout.paid example (what merchants are
// shown, docs/events.md) made unique per event and padded through its
// metadata to about size bytes: a realistic payload rather than padding.
func payoutPayload(run string, seq, size int) json.RawMessage {
	var p map[string]any
	if err := json.Unmarshal(catalogue.For([]string{benchEventType})[0].Example, &p); err != nil {
		return payloadFor(run, seq, size) // the catalogue's example is JSON; this is never reached
	}
	n := strconv.Itoa(seq)
	p["reference"] = "Invoice " + run + "-" + n
	meta := map[string]string{"order_id": "A-" + n, "bench": run}
	p["metadata"] = meta
	b, _ := json.Marshal(p) // a map of JSON values always marshals
	// The note's key, quotes and comma take len(`,"note":""`) bytes.
	if pad := size - len(b) - len(`,"note":""`); pad > 0 {
		meta["note"] = strings.Repeat("x", pad)
		b, _ = json.Marshal(p)
	}
	return b
}
