package queue

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
)

// TestAttemptParked: an attempt parked in the schedule carries no lease
// (the schedule stores JSON, where a lease has no field); the lease a
// publish took for its own pool becomes the handover its first taker may
// take over, and survives the trip through the schedule's encoding.
func TestAttemptParked(t *testing.T) {
	t.Parallel()
	until := time.Date(2026, 11, 28, 9, 0, 15, 123_000_000, time.UTC)
	base := Attempt{DeliveryID: uuid.New(), SubscriptionID: uuid.New(), MerchantID: "m1", Number: 1,
		Trigger: store.TriggerScheduled, Due: until.Add(-15 * time.Second)}
	leased := base
	leased.Leased = &store.LeasedDelivery{LeaseUntil: until}
	cases := []struct {
		name         string
		in           Attempt
		wantHandover time.Time
	}{
		{name: "leased by its publish: the lease is handed over", in: leased, wantHandover: until},
		{name: "not leased: nothing to hand over", in: base},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tc.in.Parked()
			if got.Leased != nil || !got.Handover.Equal(tc.wantHandover) {
				t.Errorf("Parked: lease %v, handover %v; want none and %v", got.Leased, got.Handover, tc.wantHandover)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back Attempt
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !back.Handover.Equal(tc.wantHandover) || back.DeliveryID != tc.in.DeliveryID {
				t.Errorf("through the schedule's encoding %s: handover %v, delivery %s; want %v and %s",
					b, back.Handover, back.DeliveryID, tc.wantHandover, tc.in.DeliveryID)
			}
			if tc.in.Leased != nil && (tc.in.Leased.LeaseUntil != until || !tc.in.Handover.IsZero()) {
				t.Error("Parked changed the attempt it was called on")
			}
		})
	}
}
