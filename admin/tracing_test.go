package admin_test

import (
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/webhookd/webhookd/admin"
)

// TestSubscriptionTraceContext: the switch of the deliveries' traceparent
// header is on unless turned off, on both surfaces (trace_context,
// traceContext), left alone by an update that does not name it, and a
// value that is not a boolean is a 400.
func TestSubscriptionTraceContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	type switched struct {
		ID           string `json:"id"`
		TraceContext *bool  `json:"trace_context"`
		Legacy       *bool  `json:"traceContext"`
	}
	on := decode[switched](t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: hookBody("https://example.com/on")}))
	off := decode[switched](t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": "https://example.com/off", "events": []string{"*"}, "trace_context": false}}))
	if on.TraceContext == nil || !*on.TraceContext || off.TraceContext == nil || *off.TraceContext {
		t.Fatalf("created trace_context %v and %v, want true (default) and false", on.TraceContext, off.TraceContext)
	}
	path := "/v1/webhook_subscriptions/" + off.ID
	for _, tc := range []struct {
		name string
		body map[string]any
		want bool
	}{
		{"left alone", map[string]any{"description": "x"}, false},
		{"null leaves it", map[string]any{"trace_context": nil}, false},
		{"on again", map[string]any{"trace_context": true}, true},
		{"off again", map[string]any{"trace_context": false}, false},
	} {
		r := h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: tc.body})
		if got := decode[switched](t, r); r.Status != http.StatusOK || got.TraceContext == nil || *got.TraceContext != tc.want {
			t.Fatalf("%s: %d %s, want trace_context %v", tc.name, r.Status, r.Body, tc.want)
		}
	}
	expectError(t, h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: map[string]any{"trace_context": "no"}}),
		http.StatusBadRequest, "parameter_invalid")

	legacy := decode[switched](t, h.legacy("create", key, "", map[string]any{"url": "https://example.com/legacy",
		"events": []string{"*"}, "traceContext": false}))
	if legacy.Legacy == nil || *legacy.Legacy {
		t.Fatalf("legacy create traceContext %v, want false", legacy.Legacy)
	}
	v1 := decode[switched](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + legacy.ID, Key: key}))
	if v1.TraceContext == nil || *v1.TraceContext {
		t.Fatalf("/v1 sees trace_context %v of the legacy create, want false", v1.TraceContext)
	}
	if got := decode[switched](t, h.legacy("update", key, "", map[string]any{"id": legacy.ID, "traceContext": true})); got.Legacy == nil || !*got.Legacy {
		t.Fatalf("legacy update traceContext %v, want true", got.Legacy)
	}
}

// TestRequestSpans: with a tracer provider, each API request is a server
// span named by its route pattern, continuing the caller's traceparent;
// the probes are not traced.
func TestRequestSpans(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	h := newHarness(t, func(c *admin.Config) { c.TracerProvider = tp })
	key := h.merchant("m1")
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sub := h.createSubscription(key, hookBody("https://example.com/traced"))
	r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
		Header: map[string]string{"traceparent": caller}})
	if r.Status != http.StatusOK {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	if r := h.doInternal(request{Method: http.MethodGet, Path: "/healthz"}); r.Status != http.StatusOK {
		t.Fatalf("healthz: %d", r.Status)
	}
	var got []string
	found := false
	for _, s := range spans.GetSpans() {
		got = append(got, s.Name)
		if s.Name == "GET /healthz" || s.Name == http.MethodGet {
			t.Errorf("the probe was traced: %q", s.Name)
		}
		if s.Name != "GET /v1/webhook_subscriptions/{id}" {
			continue
		}
		found = true
		if s.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent.SpanID().String() != "00f067aa0ba902b7" {
			t.Errorf("the request's span has parent %v, want the caller's", s.Parent)
		}
		for _, a := range s.Attributes {
			if a.Key == "http.route" && a.Value.AsString() != "/v1/webhook_subscriptions/{id}" ||
				a.Key == "http.response.status_code" && a.Value.AsInt64() != 200 {
				t.Errorf("attribute %s = %v", a.Key, a.Value.Emit())
			}
		}
	}
	if !found {
		t.Fatalf("spans %v: no span GET /v1/webhook_subscriptions/{id}", got)
	}
}
