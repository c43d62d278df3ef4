package admin_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// shaped is a subscription's delivery shape as a client decodes it, on
// either surface.
type shaped struct {
	ID           string         `json:"id"`
	Secret       string         `json:"secret"`
	PayloadStyle string         `json:"payload_style"`
	LegacyStyle  string         `json:"payloadStyle"`
	Batch        map[string]int `json:"batch"`
}

// sameInts compares two maps of ints, nil and empty alike.
func sameInts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestPayloadStyleAndBatchFields: payload_style and batch are created,
// read, changed and removed on /v1, and in camelCase on the legacy
// routes; a subscription that names neither is full and unbatched; bad
// values are refused naming the field at fault.
func TestPayloadStyleAndBatchFields(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")

	plain := h.createSubscription(key, hookBody("https://example.com/plain"))
	got := decode[shaped](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + plain.ID, Key: key}))
	if got.PayloadStyle != "full" || got.Batch != nil {
		t.Fatalf("default shape: %+v", got)
	}

	body := hookBody("https://example.com/shaped")
	body["payload_style"] = "thin"
	body["batch"] = map[string]int{"max_size": 50, "max_wait_ms": 200}
	r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: body})
	created := decode[shaped](t, r)
	if r.Status != http.StatusCreated || created.PayloadStyle != "thin" || !sameInts(created.Batch, map[string]int{"max_size": 50, "max_wait_ms": 200}) {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	// max_wait_ms defaults to 0; null removes the batch; an update that
	// names neither field leaves both.
	steps := []struct {
		patch     map[string]any
		style     string
		wantBatch map[string]int
	}{
		{map[string]any{"batch": map[string]int{"max_size": 7}}, "thin", map[string]int{"max_size": 7, "max_wait_ms": 0}},
		{map[string]any{"description": "x"}, "thin", map[string]int{"max_size": 7, "max_wait_ms": 0}},
		{map[string]any{"payload_style": "full", "batch": nil}, "full", nil},
	}
	for _, s := range steps {
		r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + created.ID, Key: key, Body: s.patch})
		got := decode[shaped](t, r)
		if r.Status != http.StatusOK || got.PayloadStyle != s.style || !sameInts(got.Batch, s.wantBatch) {
			t.Fatalf("update %v: %d %s", s.patch, r.Status, r.Body)
		}
	}

	r = h.legacy("create", key, "", map[string]any{"url": "https://example.com/legacy", "events": []string{"*"},
		"payloadStyle": "thin", "batch": map[string]int{"maxSize": 10, "maxWaitMs": 5}})
	legacy := decode[shaped](t, r)
	if r.Status != http.StatusOK || legacy.LegacyStyle != "thin" || !sameInts(legacy.Batch, map[string]int{"maxSize": 10, "maxWaitMs": 5}) ||
		bytes.Contains(r.Body, []byte("payload_style")) || bytes.Contains(r.Body, []byte("max_size")) {
		t.Fatalf("legacy create: %d %s", r.Status, r.Body)
	}
	v1 := decode[shaped](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + legacy.ID, Key: key}))
	if v1.PayloadStyle != "thin" || !sameInts(v1.Batch, map[string]int{"max_size": 10, "max_wait_ms": 5}) {
		t.Fatalf("the legacy subscription on /v1: %+v", v1)
	}
	r = h.legacy("update", key, "", map[string]any{"id": legacy.ID, "batch": map[string]int{"maxSize": 101}})
	if m := expectLegacyError(t, r, http.StatusBadRequest, "invalid_request_error"); !strings.Contains(m["message"].(string), "batch.maxSize") {
		t.Fatalf("legacy refusal does not name batch.maxSize: %s", r.Body)
	}

	bad := []struct {
		name  string
		field any
		param string
		code  string
	}{
		{"unknown style", map[string]any{"payload_style": "medium"}, "payload_style", "parameter_invalid"},
		{"size 0", map[string]any{"batch": map[string]int{"max_size": 0}}, "batch.max_size", "parameter_invalid"},
		{"size 101", map[string]any{"batch": map[string]int{"max_size": 101}}, "batch.max_size", "parameter_invalid"},
		{"size not a number", map[string]any{"batch": map[string]any{"max_size": "5"}}, "batch.max_size", "parameter_invalid"},
		{"size missing", map[string]any{"batch": map[string]int{"max_wait_ms": 5}}, "batch.max_size", "parameter_missing"},
		{"wait negative", map[string]any{"batch": map[string]int{"max_size": 5, "max_wait_ms": -1}}, "batch.max_wait_ms", "parameter_invalid"},
		{"wait 10001", map[string]any{"batch": map[string]int{"max_size": 5, "max_wait_ms": 10001}}, "batch.max_wait_ms", "parameter_invalid"},
		{"unknown field", map[string]any{"batch": map[string]int{"max_size": 5, "size": 5}}, "batch", "parameter_invalid"},
		{"not an object", map[string]any{"batch": 5}, "batch", "parameter_invalid"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			body := hookBody("https://example.com/bad")
			for k, v := range tc.field.(map[string]any) {
				body[k] = v
			}
			m := expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: body}),
				http.StatusBadRequest, tc.code)
			if m["param"] != tc.param {
				t.Fatalf("param %v, want %s", m["param"], tc.param)
			}
			m = expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + plain.ID, Key: key, Body: tc.field}),
				http.StatusBadRequest, tc.code)
			if m["param"] != tc.param {
				t.Fatalf("update: param %v, want %s", m["param"], tc.param)
			}
		})
	}
}

// TestThinDelivery: a thin subscription receives the envelope without the
// payload (the object's id and type in its place), signed over the body
// as sent; a full one beside it receives the payload; the event read with
// ?snapshot=true is the payload as published.
func TestThinDelivery(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	thinRcv := newHookReceiver(t, http.StatusOK)
	fullRcv := newHookReceiver(t, http.StatusOK)
	body := hookBody(thinRcv.URL + "/thin")
	body["payload_style"] = "thin"
	thin := h.createSubscription(key, body)
	h.createSubscription(key, hookBody(fullRcv.URL+"/full"))

	cases := []struct {
		typ, payload string
		wantID       any
		wantType     any
	}{
		{"payout.paid", `{"id":"po_1","type":"payout","status":"paid","amount":"12.00","account_holder_name":"Jane"}`, "po_1", "payout"},
		{"deposit.received", `{"id":"dp_1","amount":"5.00"}`, "dp_1", "deposit"},               // no type: the event type's noun
		{"payout.created", `{"status":"created","amount":"1.00"}`, nil, nil},                   // no id: no object
		{"conversion.created", `{"id":7,"type":"conversion"}`, nil, nil},                       // an id that is no string
		{"return.paid", `{"id":"rt_1","type":"return","nested":{"id":"x"}}`, "rt_1", "return"}, // the top-level id only
	}
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			ev := h.publish("m1", tc.typ, tc.payload)
			for _, d := range h.deliveriesOf(key, ev.ID) {
				h.waitDelivery(key, d.ID, "succeeded", settled)
			}
			thinBody := bodyOf(t, thinRcv, ev.ID)
			wh, err := standardwebhooks.NewWebhook(thin.Secret)
			if err != nil {
				t.Fatal(err)
			}
			if err := wh.Verify(thinBody.Body, thinBody.Header); err != nil {
				t.Fatalf("thin body's signature: %v", err)
			}
			var got map[string]any
			if err := json.Unmarshal(thinBody.Body, &got); err != nil {
				t.Fatal(err)
			}
			var keys []string
			for k := range got {
				keys = append(keys, k)
			}
			if slices.Sort(keys); !slices.Equal(keys, []string{"api_version", "data", "date", "id", "type"}) {
				t.Fatalf("thin body has fields %v: %s", keys, thinBody.Body)
			}
			data := got["data"].(map[string]any)
			if len(data) != 2 || data["object_id"] != tc.wantID || data["object_type"] != tc.wantType || got["id"] != ev.ID || got["type"] != tc.typ {
				t.Fatalf("thin body %s", thinBody.Body)
			}
			if bytes.Contains(thinBody.Body, []byte(`"amount"`)) || bytes.Contains(thinBody.Body, []byte(`"payload"`)) {
				t.Fatalf("thin body carries the payload: %s", thinBody.Body)
			}
			// The full subscription got the envelope as stored; the event
			// read plain and as a snapshot is the payload as published.
			fullBody := bodyOf(t, fullRcv, ev.ID)
			var env struct {
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(fullBody.Body, &env); err != nil || !jsonEqual(env.Payload, []byte(tc.payload)) {
				t.Fatalf("full body %s", fullBody.Body)
			}
			for _, q := range []string{"", "?snapshot=true", "?snapshot=false"} {
				r := h.do(request{Method: http.MethodGet, Path: "/v1/events/" + ev.ID + q, Key: key})
				if r.Status != http.StatusOK || !jsonEqual(decode[event](t, r).Payload, []byte(tc.payload)) {
					t.Fatalf("GET event%s: %d %s", q, r.Status, r.Body)
				}
			}
		})
	}
	m := expectError(t, h.do(request{Method: http.MethodGet, Path: "/v1/events/" + uuidZero + "?snapshot=yes", Key: key}),
		http.StatusBadRequest, "parameter_invalid")
	if m["param"] != "snapshot" {
		t.Fatalf("param %v", m["param"])
	}
}

const uuidZero = "00000000-0000-0000-0000-000000000000"

// bodyOf is the request rc received for event id.
func bodyOf(t *testing.T, rc *hookReceiver, id string) receivedHook {
	t.Helper()
	for _, r := range rc.requests() {
		if r.Header.Get("webhook-id") == id {
			return r
		}
	}
	t.Fatalf("no request for %s", id)
	return receivedHook{}
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
