package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The ordered scenario's defaults.
const (
	orderedEvents = 20000
	orderedKeys   = 1000
	orderedSubs   = 1
	// orderedKeyPath is where the bench puts each event's key.
	orderedKeyPath = "payload.key"
)

// ordered measures deliveries per second with ordering on: subscriptions
// ordered by payload.key, events spread over 1,000 keys in turn, so that
// each key's deliveries go one at a time, in publish order. Read it
// against throughput's deliveries_per_s: the price of ordering.
func ordered(ctx context.Context, l *lab) (*report, error) {
	subs := orDefault(l.cfg.subscriptions, orderedSubs)
	events := orDefault(l.cfg.events, orderedEvents)
	payload := orDefault(l.cfg.payload, defaultPayload)
	r := &report{scenario: "ordered", params: fmt.Sprintf("%d events over %d keys × %d ordered subscriptions, %d B payload, batches of %d, %d publishers",
		events, orderedKeys, subs, payload, l.cfg.batch, l.load.publishersFor(0))}
	res, err := l.deliver(ctx, deliveryRun{name: "ordered", merchants: []string{l.cfg.merchant + "-ord"},
		subs: subs, events: events, batch: l.cfg.batch, payload: payload, orderKeys: orderedKeys,
		prepare: func(ctx context.Context, f *fleet) error { return orderFleet(ctx, l.eng, f) }})
	if err != nil {
		return r, err
	}
	l.reportDelivery(r, res)
	r.add("ordering_keys", orderedKeys, "keys")
	if tp := l.earlier("throughput"); tp != nil {
		if v, ok := tp.get("deliveries_per_s"); ok {
			r.add("throughput_scenario_deliveries_per_s", v, "deliveries/s")
		}
	}
	return r, nil
}

// orderFleet turns ordering by payload.key on for every subscription of
// the fleet.
func orderFleet(ctx context.Context, eng *engine, f *fleet) error {
	for i, id := range f.subIDs {
		if err := eng.orderSubscription(ctx, f.keys[f.merchants[i]], id, orderedKeyPath); err != nil {
			return err
		}
	}
	return nil
}

// orderSubscription orders a subscription's deliveries by the value at
// path.
func (e *engine) orderSubscription(ctx context.Context, key, id, path string) error {
	if err := e.do(ctx, http.MethodPost, e.api+"/v1/webhook_subscriptions/"+id, merchantHeader(key),
		map[string]any{"ordering": map[string]string{"key": path}}, nil); err != nil {
		return fmt.Errorf("order subscription %s: %w", id, err)
	}
	return nil
}

// keyedPayloadFor is payloadFor with "key" set to the event's ordering key.
func keyedPayloadFor(run string, seq, size, key int) json.RawMessage {
	head := `{"bench":` + strconv.Quote(run) + `,"seq":` + strconv.Itoa(seq) + `,"key":"k-` + strconv.Itoa(key) + `","pad":"`
	const tail = `"}`
	pad := max(size-len(head)-len(tail), 0)
	return json.RawMessage(head + strings.Repeat("x", pad) + tail)
}
