// Package tracing sets up a process's OpenTelemetry traces from the
// standard OTEL_* environment variables, and holds the few rules every
// traced part of webhookd shares: how a span context travels as a W3C
// traceparent string (in Postgres, in a task), when an outbound request may
// carry one, and which attributes a span may have.
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. Then Provider is nil, and the
// traced parts hold no tracer: each span costs them one branch.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of webhookd's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another.
const ServiceName = "webhookd"

// Tracing is a process's trace pipeline: the SDK's provider, its batch
// exporter, and Shutdown, which flushes them.
type Tracing struct {
	sdk *sdktrace.TracerProvider
}

// Endpoint is the OTLP endpoint the environment configures traces to be
// sent to ("" when none: tracing is off). The exporter itself reads it, with
// every other OTEL_EXPORTER_OTLP_* variable; this only decides whether
// there is one.
func Endpoint(getenv func(string) string) string {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return ""
	}
	if e := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); e != "" {
		return e
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
}

// New starts the trace pipeline the environment configures, or none when
// it names no endpoint (Endpoint). The SDK reads the environment itself:
// the exporter OTEL_EXPORTER_OTLP_*, the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG (default: parentbased_always_on), the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, the batching OTEL_BSP_*.
// Only the protocol is chosen here (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf, the default, or grpc), since
// each protocol is its own exporter package. version is the build's, the
// resource's service.version. Export failures are logged on logger.
func New(ctx context.Context, version string, logger *slog.Logger) (*Tracing, error) {
	if Endpoint(os.Getenv) == "" {
		return &Tracing{}, nil
	}
	exporter, err := newExporter(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	// Later detectors win: the environment's names over webhookd's own.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version)),
		resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// The SDK's error handler is process-wide; an exporter that cannot
	// reach its collector says so in webhookd's log, not on bare stderr.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("trace export failed", "error", err)
	}))
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return &Tracing{sdk: sdk}, nil
}

// newExporter is the OTLP exporter of the protocol getenv names.
func newExporter(ctx context.Context, getenv func(string) string) (*otlptrace.Exporter, error) {
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp *otlptrace.Exporter
	var err error
	switch protocol {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_PROTOCOL %q: only http/protobuf and grpc are supported", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	return exp, nil
}

// Provider is the process's tracer provider, nil when tracing is off: the
// traced parts take nil for "trace nothing".
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil || t.sdk == nil {
		return nil
	}
	return t.sdk
}

// Shutdown sends the spans still buffered and stops the exporter, within
// ctx; nothing when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// Tracer is tp's tracer for webhookd, nil when tp is (tracing off).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer("github.com/webhookd/webhookd")
}

// propagator is the one format of trace context webhookd reads and
// writes: W3C Trace Context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// Extract is ctx with the remote span context carrier holds (a W3C
// traceparent and tracestate), if it holds a valid one.
func Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	return propagator.Extract(ctx, carrier)
}

// Inject writes ctx's span context into carrier as W3C traceparent (and
// tracestate), unless ctx has none or ctx was marked WithoutPropagation.
func Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	if ctx.Value(noPropagation{}) != nil {
		return
	}
	propagator.Inject(ctx, carrier)
}

// Traceparent is sc as a W3C traceparent header value, "" when sc is not
// valid: the form in which an event's span context is kept with it.
func Traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagator.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	return carrier.Get("traceparent")
}

// ParseTraceparent is the span context a traceparent value names, not
// valid when value is empty or malformed.
func ParseTraceparent(value string) trace.SpanContext {
	if value == "" {
		return trace.SpanContext{}
	}
	ctx := propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": value})
	return trace.SpanContextFromContext(ctx)
}

// noPropagation marks a context whose outbound requests carry no trace
// context.
type noPropagation struct{}

// WithoutPropagation marks ctx so that Inject writes nothing: a
// subscription that turned its traceparent header off.
func WithoutPropagation(ctx context.Context) context.Context {
	return context.WithValue(ctx, noPropagation{}, true)
}

// The attributes of webhookd's spans: ids and names only. No span ever
// carries a payload, a header's value, a secret or a target URL (whose path
// and query often hold a token): the target's host alone.
const (
	AttrEventID        = attribute.Key("webhookd.event.id")
	AttrEventType      = attribute.Key("webhookd.event.type")
	AttrMerchantID     = attribute.Key("webhookd.merchant.id")
	AttrSubscriptionID = attribute.Key("webhookd.subscription.id")
	AttrDeliveryID     = attribute.Key("webhookd.delivery.id")
	AttrAttempt        = attribute.Key("webhookd.attempt.number")
	AttrTrigger        = attribute.Key("webhookd.attempt.trigger")
	AttrQueueWait      = attribute.Key("webhookd.attempt.queue_wait_ms")
	AttrOutcome        = attribute.Key("webhookd.attempt.outcome")
	AttrErrorCode      = attribute.Key("webhookd.attempt.error")
	AttrGroupSize      = attribute.Key("webhookd.publish.group_size")
	AttrEvents         = attribute.Key("webhookd.publish.events")
	AttrCreated        = attribute.Key("webhookd.publish.created")
	AttrDeliveries     = attribute.Key("webhookd.publish.deliveries")
)
