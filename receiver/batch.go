package receiver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// HeaderBatchSize marks a batch: a request from a subscription with
// batch, whose body is {"data": [<envelope>…]} and whose webhook-id is
// the batch's own (batch_…), with the number of events it holds. The
// signature covers the whole body, as for a single delivery.
const HeaderBatchSize = "webhook-batch-size"

// ParseBatch decodes a verified batch body into its events, checking that
// it holds size of them. Each is an envelope as [ParseEvent] reads it.
func ParseBatch(body []byte, size int) ([]*Event, error) {
	var b struct {
		Data []json.RawMessage `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("%w: batch: %w", ErrMalformedEvent, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the batch", ErrMalformedEvent)
	}
	if len(b.Data) == 0 || len(b.Data) != size {
		return nil, fmt.Errorf("%w: batch holds %d events, %s says %d", ErrMalformedEvent, len(b.Data), HeaderBatchSize, size)
	}
	events := make([]*Event, len(b.Data))
	for i, raw := range b.Data {
		ev, err := ParseEvent(raw)
		if err != nil {
			return nil, fmt.Errorf("batch item %d: %w", i, err)
		}
		events[i] = ev
	}
	return events, nil
}

// serveBatch handles a verified (and decrypted) batch: each event in turn,
// each under its own claim, so that duplicates are suppressed per event
// id. The answer is the batch's: one answer decides for every event in it,
// so any failure is answered as that failure (webhookd then retries each
// event, and those handled already come back as duplicates), the first
// one met in the order 5xx, 409; otherwise 200.
func (rc *Receiver) serveBatch(w http.ResponseWriter, r *http.Request, sizeHeader string, body []byte, ts string) {
	size, err := strconv.Atoi(sizeHeader)
	if err != nil || size < 1 {
		rc.refuse(r, w, http.StatusBadRequest, HeaderBatchSize+" is not a positive count", err)
		return
	}
	events, err := ParseBatch(body, size)
	if err != nil {
		rc.refuse(r, w, http.StatusBadRequest, "body is not a webhook batch", err)
		return
	}
	attempted, _ := ParseTimestamp(ts) // verified by the caller
	status, text := http.StatusOK, "ok"
	for _, ev := range events {
		ev.Attempted = attempted
		s, t := rc.handle(r.Context(), ev)
		if worse(s, status) {
			status, text = s, t
		}
	}
	answer(w, status, text)
}

// worse tells whether answer a should replace b as a batch's answer: an
// error over a success, a server error over a conflict.
func worse(a, b int) bool {
	rank := func(s int) int {
		switch {
		case s >= 500:
			return 2
		case s >= 300:
			return 1
		}
		return 0
	}
	return rank(a) > rank(b)
}
