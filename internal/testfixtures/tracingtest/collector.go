// Package tracingtest is a real OTLP/HTTP trace receiver for tests: an
// in-process server on 127.0.0.1 that decodes every export request (the
// protobuf of go.opentelemetry.io/proto/otlp) and keeps its spans, for a
// process under test whose OTEL_EXPORTER_OTLP_ENDPOINT is URL.
package tracingtest

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in hex as a traceparent writes them.
type Span struct {
	Name         string
	TraceID      string
	SpanID       string
	ParentSpanID string
	Kind         tracepb.Span_SpanKind
	// Attributes are the span's attributes, each value as text.
	Attributes map[string]string
	// Events are the names of the span's events; EventAttributes their
	// attribute values, as text.
	Events          []string
	EventAttributes []string
	// Links are the span contexts the span links to, "traceid-spanid".
	Links []string
	// Status is the span's status message ("" for none).
	Status string
	// Service is the service.name of the resource that sent it.
	Service string
}

// Collector is the receiver.
type Collector struct {
	// URL is the base URL to give as OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string

	mu    sync.Mutex
	spans []Span
}

// NewCollector starts a receiver, stopped when t ends.
func NewCollector(t testing.TB) *Collector {
	t.Helper()
	c := &Collector{}
	srv := httptest.NewServer(http.HandlerFunc(c.receive))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// receive decodes one OTLP/HTTP export request (POST /v1/traces).
func (c *Collector) receive(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.keep(&req)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = io.Copy(w, bytes.NewReader(out))
}

func (c *Collector) keep(req *collectorpb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := attributes(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				span := Span{Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Kind: s.GetKind(), Attributes: attributes(s.GetAttributes()),
					Status: s.GetStatus().GetMessage(), Service: service}
				for _, e := range s.GetEvents() {
					span.Events = append(span.Events, e.GetName())
					for _, v := range attributes(e.GetAttributes()) {
						span.EventAttributes = append(span.EventAttributes, v)
					}
				}
				for _, l := range s.GetLinks() {
					span.Links = append(span.Links, hex.EncodeToString(l.GetTraceId())+"-"+hex.EncodeToString(l.GetSpanId()))
				}
				c.spans = append(c.spans, span)
			}
		}
	}
}

// attributes renders kv as text values by key.
func attributes(kv []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kv))
	for _, a := range kv {
		out[a.GetKey()] = text(a.GetValue())
	}
	return out
}

func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	default:
		// Doubles and arrays in the protobuf's text form.
		return v.String()
	}
}

// Spans is every span received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Trace is the spans received so far of one trace.
func (c *Collector) Trace(traceID string) []Span {
	var out []Span
	for _, s := range c.Spans() {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}
