package tracing_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/internal/testfixtures/tracingtest"
	"github.com/webhookd/webhookd/internal/tracing"
)

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"none", nil, ""},
		{"base", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318"},
		{"traces wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/v1/traces"}, "http://t:4318/v1/traces"},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, ""},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tracing.Endpoint(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Fatalf("Endpoint = %q, want %q", got, tc.want)
			}
		})
	}
}

// With no endpoint, tracing is off: no provider, nothing to shut down, and
// no tracer for the traced parts.
func TestOffWithoutEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tr, err := tracing.New(t.Context(), "test", slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if tr.Provider() != nil {
		t.Fatal("Provider is not nil with no endpoint")
	}
	if tracing.Tracer(tr.Provider()) != nil {
		t.Fatal("Tracer is not nil with no endpoint")
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// With an endpoint, spans reach it by OTLP/HTTP, named by the environment's
// service name and resource attributes, and Shutdown flushes them.
func TestExportsToEndpoint(t *testing.T) {
	c := tracingtest.NewCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.URL)
	t.Setenv("OTEL_SERVICE_NAME", "webhookd-test")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	tr, err := tracing.New(t.Context(), "v1.2.3", slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.Tracer(tr.Provider()).Start(t.Context(), "unit", trace.WithAttributes(tracing.AttrEventID.String("e1")))
	span.End()
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := c.Spans()
	if len(spans) != 1 || spans[0].Name != "unit" || spans[0].Attributes["webhookd.event.id"] != "e1" {
		t.Fatalf("spans = %+v, want the one span", spans)
	}
	if spans[0].Service != "webhookd-test" {
		t.Fatalf("service.name = %q, want the environment's", spans[0].Service)
	}
}

// A sampler that samples nothing still gives spans ids, so that the
// trace context travels; nothing is exported.
func TestSamplerFromEnvironment(t *testing.T) {
	c := tracingtest.NewCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.URL)
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	tr, err := tracing.New(t.Context(), "v", slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.Tracer(tr.Provider()).Start(t.Context(), "unsampled")
	span.End()
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if span.SpanContext().IsSampled() || len(c.Spans()) != 0 {
		t.Fatalf("sampled %v, exported %d spans; want neither", span.SpanContext().IsSampled(), len(c.Spans()))
	}
}

func TestTraceparentRoundTrip(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc := tracing.ParseTraceparent(tp)
	if !sc.IsValid() || !sc.IsSampled() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("ParseTraceparent(%q) = %+v", tp, sc)
	}
	if got := tracing.Traceparent(sc); got != tp {
		t.Fatalf("Traceparent = %q, want %q", got, tp)
	}
	for _, bad := range []string{"", "nonsense", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if tracing.ParseTraceparent(bad).IsValid() {
			t.Errorf("ParseTraceparent(%q) is valid", bad)
		}
	}
	if tracing.Traceparent(trace.SpanContext{}) != "" {
		t.Error("Traceparent of no span context is not empty")
	}
}

// A context marked WithoutPropagation injects nothing.
func TestWithoutPropagation(t *testing.T) {
	ctx := trace.ContextWithSpanContext(context.Background(), tracing.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	h := http.Header{}
	tracing.Inject(ctx, propagation.HeaderCarrier(h))
	if !strings.HasPrefix(h.Get("traceparent"), "00-4bf92f3577b34da6a3ce929d0e0e4736-") {
		t.Fatalf("traceparent = %q", h.Get("traceparent"))
	}
	h = http.Header{}
	tracing.Inject(tracing.WithoutPropagation(ctx), propagation.HeaderCarrier(h))
	if len(h) != 0 {
		t.Fatalf("headers = %v, want none", h)
	}
}

// FuzzParseTraceparent: a traceparent comes from outside (the core API's
// request, a producer task, a stored event). Whatever it holds, parsing
// never panics, and a valid one written back parses to the same span
// context.
func FuzzParseTraceparent(f *testing.F) {
	for _, seed := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "00-\x00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		sc := tracing.ParseTraceparent(value)
		if !sc.IsValid() {
			return
		}
		again := tracing.ParseTraceparent(tracing.Traceparent(sc))
		if again.TraceID() != sc.TraceID() || again.SpanID() != sc.SpanID() || again.TraceFlags() != sc.TraceFlags() {
			t.Fatalf("%q parsed to %v, written back and parsed to %v", value, sc, again)
		}
	})
}
