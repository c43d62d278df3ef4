package admin_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// batchEndpoint is a real endpoint of a batched subscription: it verifies
// every request with the published Standard Webhooks library, keeps each
// batch's events, and answers fail's status (200 when fail is nil or
// says 0).
type batchEndpoint struct {
	*httptest.Server
	mu      sync.Mutex
	secret  string
	fail    func(batch int) int
	batches [][]batchItem
	bad     []string
}

// batchItem is one event of a received batch.
type batchItem struct {
	ID      string `json:"id"`
	Payload struct {
		Account string `json:"account"`
		N       int    `json:"n"`
	} `json:"payload"`
}

func newBatchEndpoint(t *testing.T, fail func(batch int) int) *batchEndpoint {
	b := &batchEndpoint{fail: fail}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		defer b.mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(b.secret)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		var batch struct {
			Data []batchItem `json:"data"`
		}
		if err == nil {
			err = json.Unmarshal(body, &batch)
		}
		switch {
		case err != nil:
		case !strings.HasPrefix(r.Header.Get("webhook-id"), "batch_"):
			err = fmt.Errorf("webhook-id %q", r.Header.Get("webhook-id"))
		case r.Header.Get("webhook-batch-size") != strconv.Itoa(len(batch.Data)):
			err = fmt.Errorf("webhook-batch-size %q for %d events", r.Header.Get("webhook-batch-size"), len(batch.Data))
		case r.Header.Get("Content-Type") != "application/json":
			err = fmt.Errorf("content-type %q", r.Header.Get("Content-Type"))
		}
		if err != nil {
			b.bad = append(b.bad, err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		b.batches = append(b.batches, batch.Data)
		status := http.StatusOK
		if b.fail != nil {
			if s := b.fail(len(b.batches)); s != 0 {
				status = s
			}
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(b.Close)
	return b
}

// received is a copy of the batches received, and the refusals.
func (b *batchEndpoint) received() ([][]batchItem, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]batchItem(nil), b.batches...), append([]string(nil), b.bad...)
}

// subscribeBatched creates a batched subscription to b with extra fields.
func (h *harness) subscribeBatched(key string, b *batchEndpoint, fields map[string]any) subscription {
	h.t.Helper()
	body := hookBody(b.URL + "/batch")
	for k, v := range fields {
		body[k] = v
	}
	sub := h.createSubscription(key, body)
	b.mu.Lock()
	b.secret = sub.Secret
	b.mu.Unlock()
	return sub
}

// publishMany publishes n events of merchant in batches of 100 through
// the internal route; payload makes the i-th one's payload.
func (h *harness) publishMany(merchant string, n int, payload func(i int) map[string]any) {
	h.t.Helper()
	for start := 0; start < n; start += 100 {
		var events []map[string]any
		for i := start; i < min(n, start+100); i++ {
			events = append(events, map[string]any{"merchant_id": merchant, "type": "payout.paid", "payload": payload(i)})
		}
		r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events/batch", Body: map[string]any{"events": events}})
		if r.Status != http.StatusAccepted {
			h.t.Fatalf("publish batch: %d %s", r.Status, r.Body)
		}
	}
}

// TestBatchesThroughThePipeline: 1,000 events published together to a
// subscription with batch max_size 50 arrive in at most 25 requests, every
// event exactly once, each request verified with the published Standard
// Webhooks library; every delivery succeeded with one attempt carrying its
// batch's id.
func TestBatchesThroughThePipeline(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	b := newBatchEndpoint(t, nil)
	sub := h.subscribeBatched(key, b, map[string]any{"batch": map[string]int{"max_size": 50, "max_wait_ms": 2000}})
	const events = 1000
	h.publishMany("m1", events, func(i int) map[string]any { return map[string]any{"n": i} })

	seen := map[string]int{}
	if !eventually(60*time.Second, func() bool {
		batches, _ := b.received()
		clear(seen)
		for _, batch := range batches {
			for _, it := range batch {
				seen[it.ID]++
			}
		}
		return len(seen) >= events
	}) {
		t.Fatalf("%d of %d events arrived", len(seen), events)
	}
	batches, bad := b.received()
	if len(bad) > 0 {
		t.Fatalf("refused requests: %v", bad[:min(3, len(bad))])
	}
	sizes := make([]int, len(batches))
	for i, batch := range batches {
		sizes[i] = len(batch)
		if len(batch) > 50 {
			t.Errorf("a batch of %d events", len(batch))
		}
	}
	t.Logf("%d events in %d requests: %v", events, len(batches), sizes)
	if len(batches) > 25 {
		t.Errorf("%d requests for %d events, want at most 25", len(batches), events)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s arrived %d times", id, n)
		}
	}
	// The endpoint answered before the outcomes were recorded: wait for
	// the records.
	var ds []batchedDelivery
	if !eventually(10*time.Second, func() bool {
		ds = listAll[batchedDelivery](h, key, "/v1/webhook_deliveries?subscription_id="+sub.ID+"&status=succeeded", 100)
		return len(ds) == events
	}) {
		t.Fatalf("%d of %d deliveries succeeded", len(ds), events)
	}
	batchIDs := map[string]int{}
	for _, d := range ds {
		if d.Status != "succeeded" || len(d.Attempts) != 1 || d.Attempts[0].BatchID == nil {
			t.Fatalf("delivery %s: %s, attempts %+v", d.ID, d.Status, d.Attempts)
		}
		batchIDs[*d.Attempts[0].BatchID]++
	}
	if len(batchIDs) != len(batches) {
		t.Errorf("deliveries name %d batches, the endpoint got %d requests", len(batchIDs), len(batches))
	}
}

// batchedDelivery is the delivery resource with its attempts' batch ids.
type batchedDelivery struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Attempts []struct {
		Status  string  `json:"status"`
		BatchID *string `json:"batch_id"`
	} `json:"attempts"`
}

// TestBatchFailureRetriesEveryDelivery: a batch answered 500 is a failed
// attempt of each of its deliveries, and each is made again (in a batch
// formed again) and succeeds: two attempts each, the first failed, both
// with a batch id.
func TestBatchFailureRetriesEveryDelivery(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	b := newBatchEndpoint(t, func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return 0
	})
	sub := h.subscribeBatched(key, b, map[string]any{"batch": map[string]int{"max_size": 10, "max_wait_ms": 1000}})
	const events = 10
	h.publishMany("m1", events, func(i int) map[string]any { return map[string]any{"n": i} })

	var ds []batchedDelivery
	if !eventually(30*time.Second, func() bool {
		ds = listAll[batchedDelivery](h, key, "/v1/webhook_deliveries?subscription_id="+sub.ID, 100)
		for _, d := range ds {
			if d.Status != "succeeded" {
				return false
			}
		}
		return len(ds) == events
	}) {
		t.Fatalf("deliveries did not all succeed: %+v", ds)
	}
	batches, bad := b.received()
	if len(bad) > 0 {
		t.Fatalf("refused requests: %v", bad)
	}
	if len(batches[0]) != events {
		t.Fatalf("the first batch held %d events, want all %d", len(batches[0]), events)
	}
	for _, d := range ds {
		if len(d.Attempts) != 2 || d.Attempts[0].Status != "failed" || d.Attempts[1].Status != "succeeded" ||
			d.Attempts[0].BatchID == nil || d.Attempts[1].BatchID == nil || *d.Attempts[0].BatchID == *d.Attempts[1].BatchID {
			t.Fatalf("delivery %s attempts %+v, want a failed batch then a succeeded one", d.ID, d.Attempts)
		}
	}
}

// TestOrderedBatchesKeepKeyOrder: on a batched subscription ordered by
// payload.account, whose first two batches fail, each key's events arrive
// in publish order across batches, never two of one key in one batch, and
// every event arrives in the end.
func TestOrderedBatchesKeepKeyOrder(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	b := newBatchEndpoint(t, func(n int) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	h.subscribeBatched(key, b, map[string]any{"batch": map[string]int{"max_size": 20, "max_wait_ms": 100},
		"ordering": map[string]string{"key": "payload.account"}})
	const keys, perKey = 5, 8
	h.publishMany("m1", keys*perKey, func(i int) map[string]any {
		return map[string]any{"account": fmt.Sprintf("acct_%d", i%keys), "n": i / keys}
	})

	succeeded := func() []batchItem {
		batches, _ := b.received()
		var ok []batchItem
		for i, batch := range batches {
			if i >= 2 {
				ok = append(ok, batch...)
			}
		}
		return ok
	}
	if !eventually(30*time.Second, func() bool { return len(succeeded()) >= keys*perKey }) {
		t.Fatalf("%d of %d events arrived", len(succeeded()), keys*perKey)
	}
	batches, bad := b.received()
	if len(bad) > 0 {
		t.Fatalf("refused requests: %v", bad)
	}
	for i, batch := range batches {
		inBatch := map[string]bool{}
		for _, it := range batch {
			if inBatch[it.Payload.Account] {
				t.Fatalf("batch %d holds two events of %s", i, it.Payload.Account)
			}
			inBatch[it.Payload.Account] = true
		}
	}
	next := map[string]int{}
	for _, it := range succeeded() {
		if it.Payload.N != next[it.Payload.Account] {
			t.Fatalf("key %s: event %d arrived when %d was next", it.Payload.Account, it.Payload.N, next[it.Payload.Account])
		}
		next[it.Payload.Account]++
	}
	if len(succeeded()) != keys*perKey {
		t.Fatalf("%d events succeeded, want %d once each", len(succeeded()), keys*perKey)
	}
}
