package receiver_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/receiver"
)

// batchBody is a batch's body as webhookd writes it.
func batchBody(ids ...string) []byte {
	items := make([]string, len(ids))
	for i, id := range ids {
		items[i] = string(envelope(id))
	}
	return []byte(`{"data":[` + strings.Join(items, ",") + `]}`)
}

// TestReceiverBatches: a batch is verified over its whole body under its
// own id, each event goes to the handler once (duplicates suppressed per
// event id, within a batch and across batches), and the batch's answer is
// its worst event's; a batch whose size header does not match, or whose
// signature does not, reaches no handler.
func TestReceiverBatches(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	size := func(n string) func(http.Header) { return func(h http.Header) { h.Set(receiver.HeaderBatchSize, n) } }

	status, text := e.post(t, "batch_1", e.now, batchBody("e1", "e2", "e1"), size("3"))
	if status != http.StatusOK || text != "ok" {
		t.Fatalf("batch: %d %s", status, text)
	}
	if got := ids(e.got()); got != "e1,e2" {
		t.Fatalf("handled %s, want e1,e2 (the repeated e1 is a duplicate)", got)
	}

	// One failing event fails the batch; the retried batch runs only what
	// did not succeed.
	fail := true
	e.setHandle(func(ev *receiver.Event) error {
		if ev.ID == "e4" && fail {
			return errors.New("boom")
		}
		return nil
	})
	if status, _ := e.post(t, "batch_2", e.now, batchBody("e2", "e3", "e4"), size("3")); status != http.StatusInternalServerError {
		t.Fatalf("batch with a failing event: %d", status)
	}
	fail = false
	if status, _ := e.post(t, "batch_3", e.now.Add(time.Second), batchBody("e2", "e3", "e4"), size("3")); status != http.StatusOK {
		t.Fatalf("batch retried: %d", status)
	}
	if got := ids(e.got()); got != "e1,e2,e3,e4,e4" {
		t.Fatalf("handled %s, want e1,e2,e3,e4,e4 (e4 failed once, then ran again)", got)
	}

	for _, tc := range []struct {
		name string
		edit []func(http.Header)
		want int
	}{
		{"size says 3, holds 2", []func(http.Header){size("3")}, http.StatusBadRequest},
		{"size not a number", []func(http.Header){size("two")}, http.StatusBadRequest},
		{"signed for another id", []func(http.Header){size("2"), func(h http.Header) { h.Set("webhook-id", "batch_x") }}, http.StatusUnauthorized},
	} {
		before := len(e.got())
		if status, _ := e.post(t, "batch_4", e.now, batchBody("e5", "e6"), tc.edit...); status != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, status, tc.want)
		}
		if len(e.got()) != before {
			t.Errorf("%s: the handler ran", tc.name)
		}
	}
}

// ids joins the events' ids in order.
func ids(evs []*receiver.Event) string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return strings.Join(out, ",")
}

// FuzzParseBatch: any body and size either parse into exactly size events,
// each with an id and a type, or fail with ErrMalformedEvent; never a
// panic.
func FuzzParseBatch(f *testing.F) {
	f.Add(batchBody("e1", "e2"), 2)
	f.Add([]byte(`{"data":[]}`), 0)
	f.Add([]byte(`{"data":[{"id":"e1","type":"t","data":{"object_id":null,"object_type":null}}]}`), 1)
	f.Add([]byte(`{"data":null}`), 1)
	f.Fuzz(func(t *testing.T, body []byte, size int) {
		evs, err := receiver.ParseBatch(body, size)
		if err != nil {
			if !errors.Is(err, receiver.ErrMalformedEvent) {
				t.Fatalf("error %v is not ErrMalformedEvent", err)
			}
			return
		}
		if len(evs) != size {
			t.Fatalf("%d events for size %d", len(evs), size)
		}
		for _, ev := range evs {
			if ev.ID == "" || ev.Type == "" {
				t.Fatalf("event without id or type: %+v", ev)
			}
		}
	})
}
