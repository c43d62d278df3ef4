package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/webhookd/webhookd/internal/catalogue"
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
func single(ctx context.Context, l *lab) (*report, error) {
	r, _, err := singleRun(ctx, l, "single", "", nil)
	return r, err
}

// singleRun is single's workload under the scenario name, its
// subscriptions described by shape in the parameters; tune, when set,
// changes the run before it starts (its prepare, its endpoint shape).
func singleRun(ctx context.Context, l *lab, name, shape string, tune func(*deliveryRun)) (*report, *deliveryResult, error) {
	events := orDefault(l.cfg.events, singleEvents)
	subs := orDefault(l.cfg.subscriptions, 1)
	payload := orDefault(l.cfg.payload, singlePayload)
	r := &report{scenario: name, params: fmt.Sprintf("%d events × %d subscription(s)%s, %d B payout payload, one event per request, %d publishers, as fast as accepted",
		events, subs, shape, payload, l.load.publishersFor(singlePublishers))}
	d := deliveryRun{name: name, merchants: []string{l.cfg.merchant + "-" + name},
		subs: subs, events: events, batch: 1, payload: payload, publishers: singlePublishers, payloadOf: payoutPayload}
	if tune != nil {
		tune(&d)
	}
	res, err := l.deliver(ctx, d)
	if err != nil {
		return r, nil, err
	}
	l.reportDelivery(r, res)
	// deliveries_per_s runs to the last recorded attempt; this one to the
	// last arrival, what a merchant sees.
	if arrived := res.lastArrival.Sub(res.pub.start).Seconds(); !res.lastArrival.IsZero() && arrived > 0 {
		r.add("deliveries_per_s_to_last_arrival", float64(res.received)/arrived, "deliveries/s")
	}
	if res.requeuedOK {
		r.target("sweeper_requeued", "= 0", res.requeued == 0)
	}
	return r, res, nil
}

// singleShaped is singleRun to endpoints shaped by shape (mtls, jwe,
// broker), ready (when set) run on the fleet before publishing, with
// single's own figures beside the run's when single ran before it. It
// returns the run's receivers too, for the figures of the shape.
func singleShaped(ctx context.Context, l *lab, name, text string, shape endpointShape, ready func(*fleet) error) (*report, *deliveryResult, *receivers, error) {
	var rcv *receivers
	r, res, err := singleRun(ctx, l, name, text, func(d *deliveryRun) {
		d.shape = shape
		d.prepare = func(_ context.Context, f *fleet) error {
			rcv = f.rcv
			if ready != nil {
				return ready(f)
			}
			return nil
		}
	})
	if err == nil {
		l.besideSingle(r)
	}
	return r, res, rcv, err
}

// besideSingle adds to r, a variant of single's workload, the figures of
// single run earlier in this invocation, to read the variant's cost
// against: deliveries/s and the CPU of the engine per delivery.
func (l *lab) besideSingle(r *report) {
	s := l.earlier("single")
	if s == nil {
		return
	}
	if v, ok := s.get("deliveries_per_s"); ok {
		r.add("single_scenario_deliveries_per_s", v, "deliveries/s")
	}
	if v, ok := s.get("cpu_engine_ms_per_delivery"); ok {
		r.add("single_scenario_cpu_engine_ms_per_delivery", v, "CPU ms")
	}
}

// payoutPayload is the catalogue's payout.paid example (what merchants are
// shown, docs/events.md) made unique per event and filled up through its
// metadata to about size bytes with varied values, as merchants attach
// them (order and invoice ids, customer references, descriptions): a
// realistic payload rather than padding, so that any compression or
// encoding is measured on what it would meet.
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
	rng := rand.New(rand.NewPCG(uint64(seq), 0x9e3779b97f4a7c15))
	// Entries while they fit, then a memo of the exact length left: its
	// key, quotes and comma take len(`,"memo":""`) bytes, and it holds at
	// least a letter.
	const memoCost = len(`,"memo":"x"`)
	for i := 0; ; i++ {
		key, value := metadataEntry(rng, i)
		meta[key] = value
		grown, _ := json.Marshal(p)
		if len(grown) > size-memoCost {
			delete(meta, key)
			break
		}
		b = grown
	}
	if rest := size - len(b) - len(`,"memo":""`); rest > 0 {
		memo := ""
		for len(memo) < rest {
			memo += metadataWord(rng) + " "
		}
		meta["memo"] = memo[:rest]
		b, _ = json.Marshal(p)
	}
	return b
}

// metadataWord is a word of a payout's descriptions.
func metadataWord(rng *rand.Rand) string {
	words := []string{"consulting", "services", "november", "retainer", "hosting", "licence", "support", "invoice",
		"quarterly", "settlement", "refund", "supplier", "logistics", "warehouse", "berlin", "lyon", "amsterdam", "payroll"}
	return words[rng.IntN(len(words))]
}

// metadataEntry is the i-th metadata pair of a payout, its values drawn
// from rng.
func metadataEntry(rng *rand.Rand, i int) (key, value string) {
	word := func() string { return metadataWord(rng) }
	switch i % 4 {
	case 0:
		return "invoice_" + strconv.Itoa(i), fmt.Sprintf("INV-%d-%06d", 2024+rng.IntN(3), rng.IntN(1000000))
	case 1:
		return "customer_" + strconv.Itoa(i), fmt.Sprintf("cus_%016x", rng.Uint64())
	case 2:
		return "description_" + strconv.Itoa(i), word() + " " + word() + " " + word() + " " + strconv.Itoa(rng.IntN(10000))
	default:
		return "cost_centre_" + strconv.Itoa(i), fmt.Sprintf("CC-%s-%04d", strings.ToUpper(word()[:3]), rng.IntN(10000))
	}
}
