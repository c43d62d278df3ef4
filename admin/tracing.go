package admin

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/internal/tracing"
)

// requestTracing gives each API request a server span (docs/tracing.md),
// continuing the caller's trace when it sends a W3C traceparent (the core
// API's ingest call): the span of POST /internal/v1/events is the parent
// of the event's publish span. The span is named by the method and chi's
// route pattern, never the raw path; its attributes are the method, the
// route and the status, never a header's value, the query or the body.
// The probes and /metrics are not traced.
type requestTracing struct {
	// tracer is nil when tracing is off: then the middleware is the next
	// handler itself.
	tracer trace.Tracer
}

// traced is the tracing middleware.
func (t requestTracing) traced(next http.Handler) http.Handler {
	if t.tracer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := tracing.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := t.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			span.SetName(r.Method + " " + rc.RoutePattern())
			span.SetAttributes(attribute.String("http.route", rc.RoutePattern()))
		}
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, "")
		}
	})
}
