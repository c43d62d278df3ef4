package producer

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TaskTrace is the trace context an ingest task carries besides its
// event: the W3C traceparent and tracestate of the span that called
// Publish (the core API's request, say), so that webhookd's spans of the
// event continue that trace. Both are empty when the caller's context held
// no span. It travels in the task's payload, next to the event's fields.
type TaskTrace struct {
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// taskPayload is an ingest task's payload: the event's fields and its
// trace context, side by side in one JSON object (a worker of an older
// build reads the event and ignores the rest).
type taskPayload struct {
	*Event
	TaskTrace
}

// traceOf is ctx's span context in W3C Trace Context form. The caller's
// tracer is whatever OpenTelemetry provider it set up; only its span
// context is read.
func traceOf(ctx context.Context) TaskTrace {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return TaskTrace{}
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return TaskTrace{TraceParent: carrier.Get("traceparent"), TraceState: carrier.Get("tracestate")}
}
