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
func (b *bench) ordered(ctx context.Context) (*report, error) {
	subs := orDefault(b.cfg.subscriptions, orderedSubs)
	events := orDefault(b.cfg.events, orderedEvents)
	payload := orDefault(b.cfg.payload, defaultPayload)
	r := &report{scenario: "ordered", params: fmt.Sprintf("%d events over %d keys × %d ordered subscriptions, %d B payload, batches of %d, %d publishers",
		events, orderedKeys, subs, payload, b.cfg.batch, b.publishers(0))}
	res, err := b.deliver(ctx, deliveryRun{name: "ordered", merchants: []string{b.cfg.merchant + "-ord"},
		subs: subs, events: events, batch: b.cfg.batch, payload: payload, orderKeys: orderedKeys,
		prepare: b.orderFleet})
	if err != nil {
		return r, err
	}
	b.reportDelivery(r, res)
	r.add("ordering_keys", orderedKeys, "keys")
	if tp := b.find("throughput"); tp != nil {
		if v, ok := tp.get("deliveries_per_s"); ok {
			r.add("throughput_scenario_deliveries_per_s", v, "deliveries/s")
		}
	}
	return r, nil
}

// orderFleet turns ordering by payload.key on for every subscription of
// the fleet.
func (b *bench) orderFleet(ctx context.Context, f *fleet) error {
	for i, id := range f.subIDs {
		if err := b.eng.orderSubscription(ctx, f.keys[f.merchants[i]], id, orderedKeyPath); err != nil {
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
