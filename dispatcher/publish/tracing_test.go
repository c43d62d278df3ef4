package publish_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/internal/tracing"
	"github.com/webhookd/webhookd/producer"
)

// TestTracesOfABatch: events published together in the caller's trace
// each get a publish span under the caller's and a commit span of their
// own (one group commit, one span per event in it), and each attempt,
// the redeliver's too, is a child of its own event's publish span, the
// receiver's traceparent a child of the attempt's exchange.
func TestTracesOfABatch(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("m1", rcv.URL, "payout.paid")
	d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.TracerProvider = tp })
	e.Run(d)

	caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(uuid.New()), SpanID: trace.SpanID{1, 1, 2, 3, 5, 8, 13, 21},
		TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), caller)
	const n = 5
	events := make([]producer.Event, n)
	for i := range events {
		events[i] = producer.Event{ID: uuid.NewString(), MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	if _, _, errs := d.Publisher.PublishAll(ctx, events); errs[0] != nil {
		t.Fatal(errs)
	}
	e.WaitFor("every event delivered", 10*time.Second, func() bool { return len(rcv.Got()) == n })
	del := e.WaitSettled(e.Deliveries(uuid.MustParse(events[0].ID))[0].ID, 5*time.Second)
	if _, err := d.Redeliverer.Redeliver(context.Background(), "m1", del.ID); err != nil {
		t.Fatal(err)
	}
	e.WaitFor("the redelivery", 10*time.Second, func() bool { return len(rcv.Got()) == n+1 })
	e.WaitFor("the redelivery's attempt span", 5*time.Second, func() bool {
		count := 0
		for _, s := range spans.GetSpans() {
			if s.Name == "webhookd.deliver.attempt" {
				count++
			}
		}
		return count == n+1
	})

	byID := map[trace.SpanID]tracetest.SpanStub{}
	publishOf := map[string]trace.SpanID{} // event id → its publish span
	for _, s := range spans.GetSpans() {
		byID[s.SpanContext.SpanID()] = s
		if s.SpanContext.TraceID() != caller.TraceID() {
			t.Errorf("span %s is in trace %s, want the caller's %s", s.Name, s.SpanContext.TraceID(), caller.TraceID())
		}
		if s.Name == "webhookd.publish" {
			if s.Parent.SpanID() != caller.SpanID() {
				t.Errorf("publish span's parent %s, want the caller's", s.Parent.SpanID())
			}
			publishOf[attr(s, tracing.AttrEventID)] = s.SpanContext.SpanID()
		}
	}
	if len(publishOf) != n {
		t.Fatalf("%d publish spans, want one per event", len(publishOf))
	}
	commits, attempts := map[string]int{}, map[string]int{}
	for _, s := range spans.GetSpans() {
		event := attr(s, tracing.AttrEventID)
		switch s.Name {
		case "webhookd.publish.commit":
			if s.Parent.SpanID() != publishOf[event] || attr(s, tracing.AttrGroupSize) == "" {
				t.Errorf("commit span of %s: parent %s, group size %q; want its publish span %s", event, s.Parent.SpanID(), attr(s, tracing.AttrGroupSize), publishOf[event])
			}
			commits[event]++
		case "webhookd.deliver.attempt":
			if s.Parent.SpanID() != publishOf[event] {
				t.Errorf("attempt %s of %s: parent %s, want its publish span %s", attr(s, tracing.AttrAttempt), event, s.Parent.SpanID(), publishOf[event])
			}
			attempts[event]++
		}
	}
	for _, ev := range events {
		want := 1
		if ev.ID == events[0].ID {
			want = 2 // and the redeliver
		}
		if commits[ev.ID] != 1 || attempts[ev.ID] != want {
			t.Errorf("event %s: %d commit spans, %d attempt spans; want 1 and %d", ev.ID, commits[ev.ID], attempts[ev.ID], want)
		}
	}
	for _, r := range rcv.Got() {
		sc := tracing.ParseTraceparent(r.Header.Get("traceparent"))
		exchange, ok := byID[sc.SpanID()]
		if !ok || exchange.Name != http.MethodPost || byID[exchange.Parent.SpanID()].Name != "webhookd.deliver.attempt" {
			t.Errorf("delivery of %s: traceparent %q is not a child of an attempt's exchange", r.Header.Get("webhook-id"), r.Header.Get("traceparent"))
		}
	}
}

// attr is the value of s's attribute key, as text ("" when absent).
func attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.Emit()
		}
	}
	return ""
}
