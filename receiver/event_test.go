package receiver_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/webhookd/webhookd/receiver"
)

// TestParseEvent reads the envelope and ignores fields it does not know.
func TestParseEvent(t *testing.T) {
	t.Parallel()
	ev, err := receiver.ParseEvent([]byte(`{"id":"e1","type":"deposit.received","api_version":"v","payload":{"a":[1]},"date":"2026-11-23T09:14:05.123Z","added_later":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(ev.Payload, &p); err != nil || ev.ID != "e1" || ev.Type != "deposit.received" {
		t.Fatalf("%+v %v", ev, err)
	}
	for _, bad := range []string{``, `[]`, `{"id":"e1","type":"t"}`, `{"type":"t","payload":{}}`, `{"id":"e1","payload":{}}`,
		`{"id":"e1","type":"t","payload":{}} {}`, `{"id":1,"type":"t","payload":{}}`, `{"id":"e1","type":"t","payload":null}`} {
		if _, err := receiver.ParseEvent([]byte(bad)); !errors.Is(err, receiver.ErrMalformedEvent) {
			t.Errorf("ParseEvent(%s) = %v, want ErrMalformedEvent", bad, err)
		}
	}
}

func TestEventResource(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		typ, payload string
		want         receiver.Resource
	}{
		{"payout.paid", `{"id":"po_1","type":"payout","status":"paid"}`, receiver.Resource{Kind: "payout", ID: "po_1", Status: "paid"}},
		{"return.initiated", `{"id":"rt_1","status":"initiated"}`, receiver.Resource{Kind: "return", ID: "rt_1", Status: "initiated"}},
		{"deposit.received", `{"id":"dp_1"}`, receiver.Resource{Kind: "deposit", ID: "dp_1"}},
	} {
		got, err := (&receiver.Event{ID: "e", Type: tt.typ, Payload: []byte(tt.payload)}).Resource()
		if err != nil || got != tt.want {
			t.Errorf("%s: %+v, %v; want %+v", tt.payload, got, err, tt.want)
		}
		if got.Key() != tt.want.Kind+":"+tt.want.ID {
			t.Errorf("key %s", got.Key())
		}
	}
	for _, bad := range []string{`[]`, `{"status":"paid"}`, `{"id":7}`} {
		if _, err := (&receiver.Event{ID: "e", Type: "payout.paid", Payload: []byte(bad)}).Resource(); !errors.Is(err, receiver.ErrMalformedEvent) {
			t.Errorf("%s: %v, want ErrMalformedEvent", bad, err)
		}
	}
}

// TestParseThinEvent reads a thin delivery's envelope: the object in place
// of the payload, which Resource reads; an event without an object parses
// but names no resource.
func TestParseThinEvent(t *testing.T) {
	t.Parallel()
	ev, err := receiver.ParseEvent([]byte(`{"id":"e1","type":"payout.paid","api_version":"v","data":{"object_id":"po_1","object_type":"payout"},"date":"2026-11-23T09:14:05.123Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Object == nil || *ev.Object != (receiver.Object{ID: "po_1", Type: "payout"}) || len(ev.Payload) != 0 {
		t.Fatalf("%+v", ev)
	}
	if r, err := ev.Resource(); err != nil || r != (receiver.Resource{Kind: "payout", ID: "po_1"}) {
		t.Fatalf("resource %+v, %v", r, err)
	}
	none, err := receiver.ParseEvent([]byte(`{"id":"e2","type":"ping.test","api_version":"v","data":{"object_id":null,"object_type":null},"date":"2026-11-23T09:14:05.123Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.Resource(); !errors.Is(err, receiver.ErrMalformedEvent) {
		t.Fatalf("an event without an object: %v", err)
	}
}
