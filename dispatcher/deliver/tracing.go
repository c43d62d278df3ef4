package deliver

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/tracing"
)

// The spans of an attempt (docs/tracing.md). The attempt span is a child
// of the event's publish span, whose traceparent the event keeps in
// Postgres and the lease reads: every attempt of every delivery of the
// event, the first one at once and the fifth hours later on another
// worker, is in the event's trace, each a sibling under the publish span.
// Its children are the lease (timed from the request of the lease, which
// precedes knowing the trace), the opening of the signing keys, the HTTP
// exchange and the record. The exchange's span is the parent of the
// traceparent header the receiver gets, unless the subscription turned it
// off.
const (
	spanAttempt = "webhookd.deliver.attempt"
	spanLease   = "webhookd.deliver.lease"
	spanSign    = "webhookd.deliver.sign"
	spanRecord  = "webhookd.deliver.record"
	// spanHTTP names the exchange as OpenTelemetry's HTTP conventions name
	// a client span: its method.
	spanHTTP = http.MethodPost
)

// attemptTrace is the tracing of one attempt; every method does nothing
// when tracing is off (tracer nil).
type attemptTrace struct {
	tracer trace.Tracer
	clock  clock.Clock
	// started is when the lease was asked for.
	started time.Time
	span    trace.Span
}

// traceStart begins an attempt's tracing, before its lease.
func (r *Runner) traceStart() attemptTrace {
	if r.tracer == nil {
		return attemptTrace{}
	}
	return attemptTrace{tracer: r.tracer, clock: r.clock, started: r.clock.Now()}
}

// attempt starts the attempt's span once its delivery is leased (l), as
// the child of the event's publish span, and its lease span; the context
// returned carries it, and marks a subscription's requests that carry no
// traceparent.
func (t *attemptTrace) attempt(ctx context.Context, at queue.Attempt, l store.LeasedDelivery) context.Context {
	if t.tracer == nil {
		return ctx
	}
	leased := t.clock.Now()
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(t.started),
		trace.WithAttributes(tracing.AttrDeliveryID.String(l.ID.String()), tracing.AttrEventID.String(l.EventID.String()),
			tracing.AttrMerchantID.String(l.MerchantID), tracing.AttrSubscriptionID.String(l.SubscriptionID.String()),
			tracing.AttrEventType.String(l.EventType), tracing.AttrAttempt.Int(at.Number), tracing.AttrTrigger.String(string(at.Trigger)))}
	if !at.Due.IsZero() {
		// How long the attempt waited in the schedule past its due time:
		// the workers' backlog, a share, a cap or a rate limit's turn.
		opts = append(opts, trace.WithAttributes(tracing.AttrQueueWait.Int64(max(0, t.started.Sub(at.Due).Milliseconds()))))
	}
	if parent := tracing.ParseTraceparent(l.TraceParent); parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	} else {
		// An event published while tracing was off: a trace of its own.
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, t.span = t.tracer.Start(ctx, spanAttempt, opts...)
	_, lease := t.tracer.Start(ctx, spanLease, trace.WithTimestamp(t.started))
	lease.End(trace.WithTimestamp(leased))
	if !l.TraceContext {
		ctx = tracing.WithoutPropagation(ctx)
	}
	return ctx
}

// step starts a child span of the attempt; the function returned ends it
// with the step's error.
func (t *attemptTrace) step(ctx context.Context, name string) func(error) {
	if t.span == nil {
		return func(error) {}
	}
	_, span := t.tracer.Start(ctx, name)
	return func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, "internal error")
		}
		span.End()
	}
}

// result notes the exchange's outcome on the attempt span: the outcome, the
// receiver's status and the attempt's error code (DESIGN.md), never its
// answer.
func (t *attemptTrace) result(res Result, err error) {
	if t.span == nil {
		return
	}
	if err != nil {
		t.span.SetStatus(codes.Error, "internal error")
		return
	}
	t.span.SetAttributes(tracing.AttrOutcome.String(res.outcome))
	if res.HTTPStatus != nil {
		t.span.SetAttributes(attribute.Int("http.response.status_code", *res.HTTPStatus))
	}
	if res.ErrCode != nil {
		t.span.SetAttributes(tracing.AttrErrorCode.String(*res.ErrCode))
		t.span.SetStatus(codes.Error, *res.ErrCode)
	}
}

// observe is metrics.ObserveTraced with the attempt's span.
func (t *attemptTrace) observe(h interface{ Observe(float64) }, v float64) {
	if t.span == nil {
		h.Observe(v)
		return
	}
	metrics.ObserveTraced(h, v, t.span.SpanContext())
}

// end ends the attempt span.
func (t *attemptTrace) end() {
	if t.span != nil {
		t.span.End()
	}
}

// observeLatency records a delivery's latency, with ctx's trace as its
// exemplar when tracing is on.
func (r *Runner) observeLatency(ctx context.Context, v float64) {
	if r.tracer == nil {
		r.metrics.DeliveryLatency.Observe(v)
		return
	}
	metrics.ObserveTraced(r.metrics.DeliveryLatency, v, trace.SpanContextFromContext(ctx))
}

// do is client.Do(req), traced when the sender is: a client span of the
// exchange named by the endpoint's host (never its path or query, which
// often hold a token), ended when the answer's body is closed, and the
// traceparent header a child of it unless the request's context says
// otherwise (tracing.WithoutPropagation). The span carries the status and
// the error class, never a header's value nor the body. An answer handed
// over past the request's deadline is its deadline's error (inTime).
func (s *Sender) do(client *http.Client, req *http.Request) (*http.Response, error) {
	if s.tracer == nil {
		resp, err := client.Do(req)
		return inTime(req.Context(), resp, err)
	}
	attrs := []attribute.KeyValue{attribute.String("http.request.method", req.Method),
		attribute.String("server.address", req.URL.Hostname()), attribute.String("url.scheme", req.URL.Scheme)}
	if port := req.URL.Port(); port != "" {
		attrs = append(attrs, attribute.String("server.port", port))
	}
	ctx, span := s.tracer.Start(req.Context(), spanHTTP, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	req = req.WithContext(ctx)
	// The traceparent alone: a tracestate is the trace's vendors' own
	// (the core API's, say), not the merchant's to read.
	carrier := propagation.MapCarrier{}
	tracing.Inject(ctx, carrier)
	if tp := carrier.Get("traceparent"); tp != "" {
		req.Header.Set("traceparent", tp)
	}
	resp, err := client.Do(req)
	resp, err = inTime(ctx, resp, err)
	if err != nil {
		_, code := classify(ctx, err)
		span.SetAttributes(attribute.String("error.type", code))
		span.SetStatus(codes.Error, code)
		span.End()
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetAttributes(attribute.String("error.type", strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, "")
	}
	resp.Body = &spanBody{ReadCloser: resp.Body, span: span}
	return resp, nil
}

// inTime refuses an answer the transport handed over once ctx, the
// request's, was done: Go's transport returns one that raced its close of
// the connection (its read loop's, taken while it closed). Past the
// timeout it is not an answer within it (docs/decisions.md, "Success"),
// whatever its status: the exchange is a timeout. countedConn.Close keeps
// a receiver's answer to our hang-up out; this keeps out the rest, such
// as one a TLS close_notify provoked before that Close ran.
func inTime(ctx context.Context, resp *http.Response, err error) (*http.Response, error) {
	if err != nil || ctx.Err() == nil {
		return resp, err
	}
	_ = resp.Body.Close()
	return nil, context.Cause(ctx)
}

// spanBody ends the exchange's span when the answer's body is closed.
type spanBody struct {
	io.ReadCloser
	span trace.Span
}

// Close implements io.Closer.
func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.span.End()
	return err
}
