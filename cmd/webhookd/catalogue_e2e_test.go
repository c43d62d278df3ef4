package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/destination/kinds"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// The binary wires the typed catalogue: WEBHOOKD_PAYLOAD_VALIDATION=enforce
// reaches the publisher (a payout.paid with a numeric amount is 400
// validation_error on payload.amount, counted in /metrics) and
// GET /v1/asyncapi.json describes every destination kind of the build.
// (The modes themselves are admin's and dispatcher/publish's tests.)
func TestTypedCatalogueWired(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t, "WEBHOOKD_PAYLOAD_VALIDATION=enforce")
	e.start()

	var payload map[string]any
	if err := json.Unmarshal(catalogue.New(catalogue.Names()).Example("payout.paid"), &payload); err != nil {
		t.Fatal(err)
	}
	payload["amount"] = 10
	status, body := e.call(http.MethodPost, "http://"+e.internal+"/internal/v1/events", e2eToken,
		map[string]any{"merchant_id": "m_typed", "type": "payout.paid", "payload": payload})
	if status != http.StatusBadRequest || body["code"] != "validation_error" || body["param"] != "payload.amount" {
		t.Fatalf("a payload against its schema: %d %v, want 400 validation_error on payload.amount", status, body)
	}
	metrics := e.get("http://" + e.internal + "/metrics")
	if !strings.Contains(metrics, `webhookd_payload_schema_mismatches_total{type="payout.paid"} 1`) {
		t.Errorf("the mismatch is not counted in /metrics")
	}

	var doc struct {
		Channels map[string]any `json:"channels"`
	}
	if err := json.Unmarshal([]byte(e.get("http://"+e.public+"/v1/asyncapi.json")), &doc); err != nil {
		t.Fatal(err)
	}
	registry, err := kinds.Default(kinds.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range registry.Types() {
		if doc.Channels[kind] == nil {
			t.Errorf("GET /v1/asyncapi.json has no channel for %s", kind)
		}
	}
}

// get is the body of a GET without a key.
func (e *engine) get(url string) string {
	e.t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}
