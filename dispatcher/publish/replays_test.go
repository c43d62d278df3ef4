package publish_test

import (
	"errors"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// FuzzParseReplayRequest: whatever a merchant sends, the parser either
// refuses it naming a field, or returns a filter whose every value is on
// its allow-list and whose window keeps the rules.
func FuzzParseReplayRequest(f *testing.F) {
	f.Add(int64(-3600), int64(0), "", "payout.paid", "failed", "5xx")
	f.Add(int64(0), int64(-3600), "0191a8e4-0000-7000-8000-000000000000", "", "pending", "none")
	f.Add(int64(-9*86400), int64(-1), "x", "payout.exploded", "FAILED", "3xx")
	types := catalogue.New([]string{"payout.paid", "payout.failed"})
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, since, until int64, sub, typ, status, class string) {
		opt := func(s string) *string {
			if s == "" {
				return nil
			}
			return &s
		}
		req := publish.ReplayRequest{Since: now.Add(time.Duration(since) * time.Second), Until: now.Add(time.Duration(until) * time.Second),
			SubscriptionID: opt(sub), EventType: opt(typ), Status: opt(status), HTTPStatusClass: opt(class)}
		got, err := publish.ParseReplayRequest(req, types, now)
		if err != nil {
			var bad *invalid.Error
			if !errors.As(err, &bad) || bad.Param == "" {
				t.Fatalf("refusal %v names no field", err)
			}
			return
		}
		switch {
		case !got.Since.Before(got.Until), got.Until.After(now), got.Since.Before(now.Add(-store.Retention)),
			got.Until.Sub(got.Since) > publish.MaxReplayWindow:
			t.Fatalf("window %v – %v accepted", got.Since, got.Until)
		}
		if got.Status != "" && got.Status != store.DeliveryFailed && got.Status != store.DeliverySkipped && got.Status != store.DeliverySucceeded {
			t.Fatalf("status %q accepted", got.Status)
		}
		switch got.HTTPStatusClass {
		case "", store.HTTPClass4xx, store.HTTPClass5xx, store.HTTPClassNone:
		default:
			t.Fatalf("class %q accepted", got.HTTPStatusClass)
		}
		if got.EventType != "" && !types.Stored(got.EventType) {
			t.Fatalf("event type %q accepted", got.EventType)
		}
	})
}
