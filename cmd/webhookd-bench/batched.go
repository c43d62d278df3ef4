package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/webhookd/webhookd/receiver"
)

// The batched scenario's defaults (issue 28): single's workload to a
// subscription with batch {max_size 100, max_wait_ms 200}.
const (
	batchedMaxSize = 100
	batchedMaxWait = 200
)

// batched is single to a batched subscription: the same events, payload
// and publishers, delivered up to 100 at a time in one request. Read its
// deliveries_per_s and CPU per delivery against single's.
func batched(ctx context.Context, l *lab) (*report, error) {
	var rcv *receivers // the run's receivers, which count the batch requests
	r, res, err := singleRun(ctx, l, "batched", fmt.Sprintf(" with batch {max_size %d, max_wait_ms %d}", batchedMaxSize, batchedMaxWait),
		func(d *deliveryRun) {
			d.prepare = func(ctx context.Context, f *fleet) error {
				rcv = f.rcv
				for i, id := range f.subIDs {
					if err := l.eng.updateSubscription(ctx, f.keys[f.merchants[i]], id,
						map[string]any{"batch": map[string]int{"max_size": batchedMaxSize, "max_wait_ms": batchedMaxWait}}); err != nil {
						return err
					}
				}
				return nil
			}
		})
	if err != nil {
		return r, err
	}
	if rcv != nil {
		if requests := rcv.batchRequests(); requests > 0 {
			r.add("batch_requests", requests, "requests")
			r.add("deliveries_per_request", float64(res.received)/float64(requests), "deliveries")
		}
	}
	l.besideSingle(r)
	return r, nil
}

// serveBatch notes each event of a verified batch request (its
// webhook-batch-size header set) as one arrival, and answers 204: a batch
// is one request for many deliveries.
func (rs *receivers) serveBatch(w http.ResponseWriter, ep *endpoint, body []byte, arrived time.Time) {
	var b struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		rs.bad.Add(1)
		http.Error(w, "not a batch", http.StatusBadRequest)
		return
	}
	rs.batches.Add(1)
	for _, ev := range b.Data {
		rs.note(ep, ev.ID, arrived, true)
	}
	w.WriteHeader(http.StatusNoContent)
}

// batchRequests is how many batch requests the receivers accepted.
func (rs *receivers) batchRequests() int64 { return rs.batches.Load() }

// isBatch tells a batch request.
func isBatch(r *http.Request) bool { return r.Header.Get(receiver.HeaderBatchSize) != "" }
