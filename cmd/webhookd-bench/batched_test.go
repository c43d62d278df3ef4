package main

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/signer"
)

// TestReceiverCountsBatchEvents: a verified batch request counts each of
// its events as a delivery (duplicates across batches as duplicates) and
// itself as one batch request; a batch signed with another key counts as
// one bad request and no delivery.
func TestReceiverCountsBatchEvents(t *testing.T) {
	log := newPublishLog(8)
	rcv, key := armedReceivers(t, 1, 0, log)
	defer rcv.close()
	_, otherKey := mustSecret(t)
	a, b := uuid.NewString(), uuid.NewString()
	log.record(a, time.Now())
	log.record(b, time.Now())
	body := []byte(`{"data":[{"id":"` + a + `"},{"id":"` + b + `"}]}`)
	send := func(k signer.Key) int {
		req, err := http.NewRequest(http.MethodPost, rcv.endpoints[0].url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		signer.SetHeaders(req.Header, "batch_"+uuid.NewString(), time.Now(), body, k)
		req.Header.Set("webhook-batch-size", "2")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := send(key); status != http.StatusNoContent {
		t.Fatalf("batch: %d", status)
	}
	if status := send(key); status != http.StatusNoContent {
		t.Fatalf("batch again: %d", status)
	}
	if status := send(otherKey); status != http.StatusBadRequest {
		t.Fatalf("batch with another key: %d", status)
	}
	if got, want := rcv.counts(), (endpointCounts{Unique: 2, Duplicates: 2, BadSignatures: 1}); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	if n := rcv.batchRequests(); n != 2 {
		t.Fatalf("%d batch requests, want 2", n)
	}
}
