package admin_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/asyncapi"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/payloadschema"
)

// GET /v1/event_types/{name} shows one type with its schema, ping.test
// included; the list leaves schemas out; an unknown name is 404 in the
// spec's format; the route takes a key like the list.
func TestEventTypeShowsItsSchema(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m_schema")
	for _, name := range []string{"payout.paid", "deposit.received", catalogue.TestType} {
		r := h.do(request{Method: http.MethodGet, Path: "/v1/event_types/" + name, Key: key})
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", name, r.Status, r.Body)
		}
		var got catalogue.EventType
		if err := json.Unmarshal(r.Body, &got); err != nil {
			t.Fatal(err)
		}
		want := catalogue.New(h.cfg.EventTypes).Entries()
		i := slices.IndexFunc(want, func(et catalogue.EventType) bool { return et.Name == name })
		if got.Name != name || string(got.Schema) != string(want[i].Schema) || string(got.Example) != string(want[i].Example) {
			t.Errorf("%s: got %s", name, r.Body)
		}
	}

	unknown := h.do(request{Method: http.MethodGet, Path: "/v1/event_types/payout.lost", Key: key})
	body := unknown.JSON(t)
	if unknown.Status != http.StatusNotFound || body["code"] != "resource_not_found" || body["category"] != "invalid_request_error" ||
		body["param"] != nil || body["correlation_id"] == "" {
		t.Errorf("unknown type: %d %s", unknown.Status, unknown.Body)
	}
	// A type of the spec this deployment does not configure is unknown too.
	if r := h.do(request{Method: http.MethodGet, Path: "/v1/event_types/conversion.failed", Key: key}); r.Status != http.StatusNotFound {
		t.Errorf("an unconfigured type: %d", r.Status)
	}
	if r := h.do(request{Method: http.MethodGet, Path: "/v1/event_types/payout.paid"}); r.Status != http.StatusUnauthorized {
		t.Errorf("without a key: %d", r.Status)
	}

	list := h.do(request{Method: http.MethodGet, Path: "/v1/event_types", Key: key})
	var page struct {
		Data []map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(list.Body, &page); err != nil || len(page.Data) == 0 {
		t.Fatalf("list: %s", list.Body)
	}
	for _, et := range page.Data {
		if _, ok := et["schema"]; ok {
			t.Errorf("the list shows %s's schema", et["name"])
		}
	}
}

// GET /v1/asyncapi.json is public and describes the configured catalogue
// and the destination kinds the registry holds; the document's validity
// is internal/asyncapi's test.
func TestAsyncAPIDocumentServedPublicly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do(request{Method: http.MethodGet, Path: "/v1/asyncapi.json"})
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/asyncapi.json: %d %s", r.Status, r.Body)
	}
	var doc struct {
		AsyncAPI string                    `json:"asyncapi"`
		Channels map[string]map[string]any `json:"channels"`
		Comp     struct {
			Messages map[string]any `json:"messages"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil || doc.AsyncAPI != asyncapi.Version {
		t.Fatalf("document: %v %.200s", err, r.Body)
	}
	for _, name := range asyncapi.ChannelNames(h.cfg.Kinds.Metadata()) {
		if doc.Channels[name] == nil {
			t.Errorf("no channel %s", name)
		}
	}
	for _, typ := range append(slices.Clone(h.cfg.EventTypes), catalogue.TestType) {
		if doc.Comp.Messages[typ] == nil {
			t.Errorf("no message %s", typ)
		}
	}
	if want := len(h.cfg.EventTypes) + len(catalogue.Operational()) + 1; len(doc.Comp.Messages) != want {
		t.Errorf("%d messages, want the %d configured types, the operational ones and ping.test", len(doc.Comp.Messages), len(h.cfg.EventTypes))
	}
}

// withValidation makes the real dispatcher, judging payloads in mode, the
// harness's Publisher.
func withValidation(t *testing.T, mode payloadschema.Mode) func(*admin.Config) {
	return withIngestPipeline(t, func(cfg *admin.Config, dc *dispatcher.Config) {
		payloads, err := payloadschema.New(payloadschema.Config{Mode: mode, Types: catalogue.New(cfg.EventTypes).Entries(),
			Registerer: cfg.Registerer})
		if err != nil {
			t.Fatal(err)
		}
		dc.Payloads, dc.MaxPayloadBytes = payloads, 64<<10
	})
}

// payoutPaid is the catalogue's payout.paid example, amount set to amount.
func payoutPaid(t *testing.T, amount any) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(catalogue.New(catalogue.Names()).Example("payout.paid"), &p); err != nil {
		t.Fatal(err)
	}
	p["amount"] = amount
	return p
}

// mismatchCount reads webhookd_payload_schema_mismatches_total{type}.
func mismatchCount(t *testing.T, h *harness, typ string) float64 {
	t.Helper()
	families, err := h.cfg.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetName() == "webhookd_payload_schema_mismatches_total" && m.GetLabel()[0].GetValue() == typ {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1 // no series: validation is not wired
}

// Each mode on the core API's publish routes: enforce refuses a payload
// that does not match with 400 validation_error naming the member (in a
// batch, under its index, and publishes none of it); warn publishes it
// and counts it; off publishes it and counts nothing. A matching payload
// is published in every mode.
func TestPublishJudgesPayloadsByMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode      payloadschema.Mode
		wrongCode int
		stored    int
		counted   float64
	}{
		{payloadschema.Enforce, http.StatusBadRequest, 1, 2},
		{payloadschema.Warn, http.StatusAccepted, 4, 2},
		{payloadschema.Off, http.StatusAccepted, 4, 0},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, withValidation(t, tc.mode))
			h.merchant("m_v")
			event := func(amount any) map[string]any {
				return map[string]any{"merchant_id": "m_v", "type": "payout.paid", "payload": payoutPaid(t, amount)}
			}
			good := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: event("10.00")})
			if good.Status != http.StatusAccepted {
				t.Fatalf("a matching payload: %d %s", good.Status, good.Body)
			}
			wrong := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: event(10)})
			if wrong.Status != tc.wrongCode {
				t.Fatalf("a payload with a numeric amount: %d %s, want %d", wrong.Status, wrong.Body, tc.wrongCode)
			}
			batch := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events/batch",
				Body: map[string]any{"events": []any{event("1.00"), event(true)}}})
			if batch.Status != tc.wrongCode {
				t.Fatalf("a batch with a wrong payload: %d %s, want %d", batch.Status, batch.Body, tc.wrongCode)
			}
			if tc.mode == payloadschema.Enforce {
				for _, c := range []struct {
					r     response
					param string
				}{{wrong, "payload.amount"}, {batch, "events[1].payload.amount"}} {
					body := c.r.JSON(t)
					if body["code"] != "validation_error" || body["category"] != "invalid_request_error" || body["param"] != c.param {
						t.Errorf("refusal: %s, want validation_error on %s", c.r.Body, c.param)
					}
				}
			}
			var stored int
			if err := h.store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM events`).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if stored != tc.stored {
				t.Errorf("%d events stored, want %d", stored, tc.stored)
			}
			if got := mismatchCount(t, h, "payout.paid"); got != tc.counted {
				t.Errorf("mismatches counted: %v, want %v", got, tc.counted)
			}
		})
	}
}
