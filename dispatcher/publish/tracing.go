package publish

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/tracing"
	"github.com/webhookd/webhookd/producer"
)

// The spans of a publish (docs/tracing.md).
//
// Each event gets a publish span, a child of the caller's span (the ingest
// request's, or the producer task's): the span the event keeps
// (store.Event.TraceParent) and every attempt of its deliveries descends
// from. A group commit writes many events in one transaction; rather than
// one span in one trace linked from the others, each event's trace gets a
// commit span of its own, a child of its publish span, timed by the
// group's write and saying how many events shared it: every event's trace
// is whole, and a sampled event shows the commit it waited for.
const (
	spanIngest  = "webhookd.ingest"
	spanPublish = "webhookd.publish"
	spanCommit  = "webhookd.publish.commit"
)

// publishTracer makes the spans of a Publisher's publishes; its methods do
// nothing when tracing is off (a nil tracer). It is the Publisher's
// tracing, apart from its rules.
type publishTracer struct {
	tracer trace.Tracer
	// clock times the commit spans.
	clock clock.Clock
}

// publishSpan is one event's publish span; its methods do nothing when
// tracing is off.
type publishSpan struct{ span trace.Span }

// publish starts e's publish span under ctx's.
func (p publishTracer) publish(ctx context.Context, e store.NewEvent) (context.Context, publishSpan) {
	if p.tracer == nil {
		return ctx, publishSpan{}
	}
	ctx, span := p.tracer.Start(ctx, spanPublish, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(tracing.AttrMerchantID.String(e.MerchantID), tracing.AttrEventType.String(e.Type)))
	return ctx, publishSpan{span: span}
}

// publishAll starts the publish span of each of a batch's events (reqs,
// whose trace it sets); the function returned ends them with the batch's
// outcome.
func (p publishTracer) publishAll(ctx context.Context, reqs []publishRequest) func(evs []store.Event, created []bool, errs []error) {
	if p.tracer == nil {
		return func([]store.Event, []bool, []error) {}
	}
	spans := make([]publishSpan, len(reqs))
	for i := range reqs {
		_, spans[i] = p.publish(ctx, reqs[i].event)
		reqs[i].trace = spans[i].context()
	}
	return func(evs []store.Event, created []bool, errs []error) {
		for i, s := range spans {
			s.end(published{event: evs[i], created: created[i]}, errs[i])
		}
	}
}

// context is the span's context, the parent of the event's commit and
// attempts (invalid when tracing is off).
func (s publishSpan) context() trace.SpanContext {
	if s.span == nil {
		return trace.SpanContext{}
	}
	return s.span.SpanContext()
}

// end ends the span with what the publish wrote.
func (s publishSpan) end(out published, err error) {
	if s.span == nil {
		return
	}
	if out.event.ID != uuid.Nil {
		s.span.SetAttributes(tracing.AttrEventID.String(out.event.ID.String()), tracing.AttrCreated.Bool(out.created),
			tracing.AttrDeliveries.Int(len(out.deliveries)))
	}
	if err != nil {
		// The rule broken, or the kind of failure; never the event's text.
		s.span.SetStatus(codes.Error, failure(err))
	}
	s.span.End()
}

// failure names what went wrong without quoting the event.
func failure(err error) string {
	if bad := invalid.As(err); bad != nil {
		return "refused: " + bad.Rule
	}
	return "publish failed"
}

// commitStarted is when writeGroup began, for the commit spans; zero when
// tracing is off.
func (p publishTracer) commitStarted() time.Time {
	if p.tracer == nil {
		return time.Time{}
	}
	return p.clock.Now()
}

// committed is what writeGroup wrote: each event written, reqs[i] for i
// in at, whose outcome is out[i], errs[i].
type committed struct {
	reqs []publishRequest
	at   []int
	out  []published
	errs []error
}

// commit gives each event a group wrote its commit span, from started
// until now.
func (p publishTracer) commit(ctx context.Context, started time.Time, group committed) {
	if p.tracer == nil {
		return
	}
	reqs, at, out, errs := group.reqs, group.at, group.out, group.errs
	ended := p.clock.Now()
	for _, i := range at {
		if !reqs[i].trace.IsValid() {
			continue
		}
		_, span := p.tracer.Start(trace.ContextWithSpanContext(ctx, reqs[i].trace), spanCommit, trace.WithTimestamp(started),
			trace.WithAttributes(tracing.AttrGroupSize.Int(len(reqs)), tracing.AttrEvents.Int(len(at)),
				tracing.AttrEventID.String(out[i].event.ID.String()), tracing.AttrMerchantID.String(out[i].event.MerchantID),
				tracing.AttrCreated.Bool(out[i].created), tracing.AttrDeliveries.Int(len(out[i].deliveries))))
		if errs[i] != nil {
			span.SetStatus(codes.Error, failure(errs[i]))
		}
		span.End(trace.WithTimestamp(ended))
	}
}

// ingest starts the span of a producer task, a child of the span that
// published it (producer.TaskTrace in its payload).
func (p publishTracer) ingest(ctx context.Context, payload []byte, e producer.Event) (context.Context, trace.Span) {
	if p.tracer == nil {
		return ctx, nil
	}
	var tt producer.TaskTrace
	_ = json.Unmarshal(payload, &tt) // a task without one starts a trace
	ctx = tracing.Extract(ctx, propagation.MapCarrier{"traceparent": tt.TraceParent, "tracestate": tt.TraceState})
	return p.tracer.Start(ctx, spanIngest, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(tracing.AttrEventID.String(e.ID), tracing.AttrMerchantID.String(e.MerchantID), tracing.AttrEventType.String(e.Type)))
}

// endIngest ends ingest's span (nil: tracing is off).
func endIngest(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, failure(err))
	}
	span.End()
}
