package producer_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/producer"
)

// TestPublishCarriesTheCallersTrace: the task of an event published in a
// traced context carries that span's W3C traceparent beside the event; one
// published without a span carries none.
func TestPublishCarriesTheCallersTrace(t *testing.T) {
	p, insp, _ := newProducer(t)
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	traced, untraced := uuid.NewString(), uuid.NewString()
	for id, ctx := range map[string]context.Context{
		traced:   trace.ContextWithSpanContext(context.Background(), sc),
		untraced: context.Background(),
	} {
		if err := p.Publish(ctx, producer.Event{ID: id, MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{"id":"po_1"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{traced: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", untraced: ""}
	for id, tp := range want {
		info, err := insp.GetTaskInfo(producer.Queue, "e:"+id)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			producer.Event
			producer.TaskTrace
		}
		if err := json.Unmarshal(info.Payload, &got); err != nil {
			t.Fatal(err)
		}
		if got.TraceParent != tp || got.ID != id || got.MerchantID != "m1" {
			t.Errorf("task of %s: %+v, want traceparent %q and the event", id, got, tp)
		}
	}
}
