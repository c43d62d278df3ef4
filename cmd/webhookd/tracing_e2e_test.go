package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/tracingtest"
	"github.com/webhookd/webhookd/internal/tracing"
	"github.com/webhookd/webhookd/producer"
)

// traceReceiver is a real endpoint that keeps the traceparent header of
// every request, answering each with the status fail gives its number
// (204 when fail is nil).
type traceReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
	fail    func(n int) int
}

func newTraceReceiver(t *testing.T, fail func(n int) int) *traceReceiver {
	r := &traceReceiver{fail: fail}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.headers = append(r.headers, req.Header.Clone())
		n := len(r.headers)
		r.mu.Unlock()
		status := http.StatusNoContent
		if r.fail != nil {
			status = r.fail(n)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

// received is the headers of every request so far.
func (r *traceReceiver) received() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.headers)
}

// The spans' names (docs/tracing.md).
const (
	spanIngestRequest = "POST /internal/v1/events"
	spanPublish       = "webhookd.publish"
	spanCommit        = "webhookd.publish.commit"
	spanAttempt       = "webhookd.deliver.attempt"
	spanIngestTask    = "webhookd.ingest"
)

// TestTracesEndToEnd runs the binary with an OTLP endpoint (a real OTLP/HTTP
// receiver in the test) and follows one event published by the core API in
// its own trace: the ingest request, the publish, the commit and both
// attempts of a delivery that fails once are one trace under the caller's
// span; the receiver's traceparent continues it (and the caller's
// tracestate stays inside); a subscription with the
// header turned off gets none; the latency histogram's exemplar names the
// trace; and no span holds a payload value, a secret or the target's path.
func TestTracesEndToEnd(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	collector := tracingtest.NewCollector(t)
	e := newEngine(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_BSP_SCHEDULE_DELAY=50",
		"OTEL_SERVICE_NAME=webhookd-e2e", "WEBHOOKD_RETRY_SCHEDULE=200ms,200ms")
	e.start()
	key := e.keysCreate("m_trace")
	const secretPath = "/hook/tok_path_secret_5c1f"
	const secretQuery = "token=tok_query_secret_9a2e"

	// One endpoint fails its first request, one has its header off.
	failing := newTraceReceiver(t, func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	quiet := newTraceReceiver(t, nil)
	var secrets []string
	for _, sub := range []map[string]any{
		{"url": failing.URL + secretPath + "?" + secretQuery, "events": []string{"payout.paid"}},
		{"url": quiet.URL + "/quiet", "events": []string{"payout.paid"}, "trace_context": false},
	} {
		status, created := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key, sub)
		if status != 201 {
			t.Fatalf("create subscription: %d %v", status, created)
		}
		if created["trace_context"] != sub["trace_context"] && sub["trace_context"] != nil {
			t.Fatalf("created trace_context = %v, want %v", created["trace_context"], sub["trace_context"])
		}
		secrets = append(secrets, created["secret"].(string))
	}

	// The core API publishes inside its own trace.
	caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(uuid.New()), SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled})
	const payloadValue = "payload_value_3f7d"
	body, _ := json.Marshal(map[string]any{"merchant_id": "m_trace", "type": "payout.paid",
		"payload": map[string]any{"id": "po_1", "note": payloadValue}})
	req, _ := http.NewRequest(http.MethodPost, "http://"+e.internal+"/internal/v1/events", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", tracing.Traceparent(caller))
	req.Header.Set("tracestate", "corp=internal7b")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&ev)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("publish: %d %v", resp.StatusCode, ev)
	}
	eventID := ev["id"].(string)

	traceID := caller.TraceID().String()
	waitFor(t, "two attempts to the failing endpoint and one to the quiet one", 20*time.Second, func() bool {
		return len(failing.received()) == 2 && len(quiet.received()) == 1
	})
	waitFor(t, "the three attempt spans exported", 10*time.Second, func() bool {
		n := 0
		for _, s := range collector.Trace(traceID) {
			if s.Name == spanAttempt && s.Attributes["webhookd.attempt.outcome"] != "" {
				n++
			}
		}
		return n == 3
	})
	spans := collector.Trace(traceID)
	byID := map[string]tracingtest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	one := func(name string, where func(tracingtest.Span) bool) tracingtest.Span {
		t.Helper()
		var found []tracingtest.Span
		for _, s := range spans {
			if s.Name == name && (where == nil || where(s)) {
				found = append(found, s)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d spans %q in the trace, want 1; trace: %+v", len(found), name, spans)
		}
		return found[0]
	}

	// The ingest request continues the caller's span; the publish is its
	// child, and the commit and every attempt are the publish's.
	ingest := one(spanIngestRequest, nil)
	if ingest.ParentSpanID != caller.SpanID().String() || ingest.Service != "webhookd-e2e" {
		t.Fatalf("ingest span's parent %s (service %q), want the caller's %s", ingest.ParentSpanID, ingest.Service, caller.SpanID())
	}
	publish := one(spanPublish, nil)
	commit := one(spanCommit, nil)
	if publish.ParentSpanID != ingest.SpanID || commit.ParentSpanID != publish.SpanID {
		t.Fatalf("publish's parent %s, commit's %s; want the ingest %s and the publish %s", publish.ParentSpanID, commit.ParentSpanID,
			ingest.SpanID, publish.SpanID)
	}
	if publish.Attributes["webhookd.event.id"] != eventID || commit.Attributes["webhookd.event.id"] != eventID ||
		publish.Attributes["webhookd.merchant.id"] != "m_trace" {
		t.Fatalf("publish %v, commit %v: want the event id %s and merchant", publish.Attributes, commit.Attributes, eventID)
	}
	attempt := func(url string, n string) tracingtest.Span {
		return one(spanAttempt, func(s tracingtest.Span) bool {
			return s.Attributes["webhookd.attempt.number"] == n && hasChild(spans, s.SpanID, http.MethodPost, func(c tracingtest.Span) bool {
				return strings.Contains(url, c.Attributes["server.address"]+":"+c.Attributes["server.port"])
			})
		})
	}
	first, second := attempt(failing.URL, "1"), attempt(failing.URL, "2")
	for _, a := range []tracingtest.Span{first, second} {
		if a.ParentSpanID != publish.SpanID || a.Attributes["webhookd.event.id"] != eventID || a.Attributes["webhookd.delivery.id"] == "" ||
			a.Attributes["webhookd.subscription.id"] == "" || a.Attributes["webhookd.event.type"] != "payout.paid" {
			t.Fatalf("attempt span %+v: want a child of the publish %s with the event's ids", a, publish.SpanID)
		}
		for _, step := range []string{"webhookd.deliver.lease", "webhookd.deliver.sign", "webhookd.deliver.record", http.MethodPost} {
			if !hasChild(spans, a.SpanID, step, nil) {
				t.Errorf("attempt %s has no %s span", a.Attributes["webhookd.attempt.number"], step)
			}
		}
	}
	if first.Attributes["webhookd.attempt.error"] != "http_status" || first.Attributes["http.response.status_code"] != "500" ||
		second.Attributes["webhookd.attempt.outcome"] != "success" {
		t.Fatalf("first attempt %v, second %v: want a 500 then a success", first.Attributes, second.Attributes)
	}

	// The receiver's traceparent is a child of that attempt's HTTP span, in
	// the event's trace; the quiet subscription's requests carry none.
	for i, h := range failing.received() {
		sc := tracing.ParseTraceparent(h.Get("traceparent"))
		parent, ok := byID[sc.SpanID().String()]
		if sc.TraceID().String() != traceID || !ok || parent.Name != http.MethodPost {
			t.Fatalf("request %d's traceparent %q: want a child of an exchange span in trace %s", i+1, h.Get("traceparent"), traceID)
		}
		if h.Get("tracestate") != "" {
			t.Errorf("request %d carries the caller's tracestate %q", i+1, h.Get("tracestate"))
		}
		if want := []string{first.SpanID, second.SpanID}[i]; parent.ParentSpanID != want {
			t.Errorf("request %d's exchange span is a child of %s, want attempt %d's %s", i+1, parent.ParentSpanID, i+1, want)
		}
	}
	if h := quiet.received()[0]; h.Get("traceparent") != "" || h.Get("tracestate") != "" {
		t.Fatalf("the subscription with trace_context false got traceparent %q", h.Get("traceparent"))
	}

	// The latency histogram's exemplar names a sampled trace: this one.
	scrapeReq, _ := http.NewRequest(http.MethodGet, "http://"+e.internal+"/metrics", nil)
	scrapeReq.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	var exposition string
	waitFor(t, "the latency exemplar", 10*time.Second, func() bool {
		resp, err := http.DefaultClient.Do(scrapeReq)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		exposition = string(b)
		return strings.Contains(exposition, `webhookd_delivery_latency_seconds_bucket`) &&
			strings.Contains(exposition, `# {trace_id="`+traceID+`"}`)
	})

	// No span holds the payload, a secret or the target's path or query.
	forbidden := append([]string{payloadValue, "tok_path_secret", "tok_query_secret", key, e2eToken, e2eMasterKey}, secrets...)
	for _, s := range collector.Spans() {
		for _, text := range spanText(s) {
			for _, f := range forbidden {
				if strings.Contains(text, f) {
					t.Errorf("span %q holds %q: %q", s.Name, f, text)
				}
			}
		}
	}
}

// TestTracesFromProducer: an event published with package producer from a
// traced context is stored and delivered in the caller's trace, its ingest
// task's span a child of the caller's span.
func TestTracesFromProducer(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	collector := tracingtest.NewCollector(t)
	e := newEngine(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_BSP_SCHEDULE_DELAY=50")
	e.start()
	key := e.keysCreate("m_tracep")
	r := newTraceReceiver(t, nil)
	if status, sub := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key,
		map[string]any{"url": r.URL + "/hook", "events": []string{"payout.paid"}}); status != 201 {
		t.Fatalf("create subscription: %d %v", status, sub)
	}
	p, err := producer.NewFromURL(e.redis.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(uuid.New()), SpanID: trace.SpanID{8, 7, 6, 5, 4, 3, 2, 1},
		TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), caller)
	if err := p.Publish(ctx, producer.Event{ID: uuid.NewString(), MerchantID: "m_tracep", Type: "payout.paid",
		Payload: json.RawMessage(`{"id":"po_2"}`)}); err != nil {
		t.Fatal(err)
	}
	traceID := caller.TraceID().String()
	waitFor(t, "the delivery", 20*time.Second, func() bool { return len(r.received()) == 1 })
	waitFor(t, "the attempt span exported", 10*time.Second, func() bool {
		return slices.ContainsFunc(collector.Trace(traceID), func(s tracingtest.Span) bool { return s.Name == spanAttempt })
	})
	spans := collector.Trace(traceID)
	var ingest, publish tracingtest.Span
	for _, s := range spans {
		switch s.Name {
		case spanIngestTask:
			ingest = s
		case spanPublish:
			publish = s
		}
	}
	if ingest.ParentSpanID != caller.SpanID().String() || publish.ParentSpanID != ingest.SpanID || ingest.SpanID == "" {
		t.Fatalf("ingest task span %+v, publish %+v: want the caller's child and its child", ingest, publish)
	}
	if !hasChild(spans, publish.SpanID, spanAttempt, nil) {
		t.Fatalf("no attempt span under the publish span: %+v", spans)
	}
	if sc := tracing.ParseTraceparent(r.received()[0].Get("traceparent")); sc.TraceID().String() != traceID {
		t.Fatalf("the receiver's traceparent %q is not in trace %s", r.received()[0].Get("traceparent"), traceID)
	}
}

// hasChild reports whether spans hold a span named name whose parent is
// parent (and that where accepts, when not nil).
func hasChild(spans []tracingtest.Span, parent, name string, where func(tracingtest.Span) bool) bool {
	return slices.ContainsFunc(spans, func(s tracingtest.Span) bool {
		return s.ParentSpanID == parent && s.Name == name && (where == nil || where(s))
	})
}

// spanText is every text a span carries: its name, status, attribute keys
// and values, event names and attributes.
func spanText(s tracingtest.Span) []string {
	out := []string{s.Name, s.Status}
	for k, v := range s.Attributes {
		out = append(out, k, v)
	}
	return append(append(out, s.Events...), s.EventAttributes...)
}
