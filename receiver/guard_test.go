package receiver_test

import (
	"context"
	"testing"

	"github.com/webhookd/webhookd/receiver"
)

// TestGuardVerdicts plays sequences of events about one payout: each
// applied event is recorded, as a handler would; the verdict of the last
// one is checked.
func TestGuardVerdicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		applied []string // statuses recorded before, in order
		next    string
		want    receiver.Verdict
	}{
		{"first event", nil, "sent", receiver.Apply},
		{"in order", []string{"initiated", "submitted"}, "sent", receiver.Apply},
		{"skipping a status", []string{"initiated"}, "sent", receiver.Apply},
		{"the same status again", []string{"sent"}, "sent", receiver.Apply},
		{"sent after returned is stale", []string{"initiated", "sent", "returned"}, "sent", receiver.Stale},
		{"initiated after submitted is stale", []string{"submitted"}, "initiated", receiver.Stale},
		{"sent after failed: fetch", []string{"initiated", "failed"}, "sent", receiver.Fetch},
		{"initiated after failed: fetch", []string{"failed"}, "initiated", receiver.Fetch},
		{"failed after submitted", []string{"initiated", "submitted"}, "failed", receiver.Apply},
		{"failed after returned: fetch", []string{"returned"}, "failed", receiver.Fetch},
		{"failed again", []string{"failed"}, "failed", receiver.Apply},
		{"unranked status", []string{"returned"}, "paid", receiver.Apply},
		{"unranked status is not recorded", []string{"returned", "created"}, "sent", receiver.Stale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			g, err := receiver.NewGuard(receiver.GuardConfig{Store: receiver.NewMemoryStatusStore()})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.applied {
				if err := g.Record(ctx, receiver.Resource{Kind: "payout", ID: "po_1", Status: s}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := g.Check(ctx, receiver.Resource{Kind: "payout", ID: "po_1", Status: tt.next})
			if err != nil || got != tt.want {
				t.Fatalf("Check(%s) after %v = %s, %v; want %s", tt.next, tt.applied, got, err, tt.want)
			}
			// Another payout and another kind are not affected.
			if v, _ := g.Check(ctx, receiver.Resource{Kind: "payout", ID: "po_2", Status: "initiated"}); v != receiver.Apply {
				t.Errorf("another payout: %s", v)
			}
			if v, _ := g.Check(ctx, receiver.Resource{Kind: "conversion", ID: "po_1", Status: "initiated"}); v != receiver.Apply {
				t.Errorf("another kind: %s", v)
			}
		})
	}
}

// TestGuardSpecScenario: the two cases of the spec, from the events
// themselves: a payout's "sent" arriving after its "returned" is dropped;
// "sent" after "failed" makes the handler fetch the payout.
func TestGuardSpecScenario(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, err := receiver.NewGuard(receiver.GuardConfig{Store: receiver.NewMemoryStatusStore()})
	if err != nil {
		t.Fatal(err)
	}
	event := func(id, status string) *receiver.Event {
		return &receiver.Event{ID: id, Type: "payout." + status,
			Payload: []byte(`{"id":"` + id[:4] + `","type":"payout","status":"` + status + `"}`)}
	}
	handle := func(ev *receiver.Event) receiver.Verdict {
		t.Helper()
		r, err := ev.Resource()
		if err != nil {
			t.Fatal(err)
		}
		v, err := g.Check(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if v == receiver.Apply {
			if err := g.Record(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		return v
	}
	for _, step := range []struct {
		ev   *receiver.Event
		want receiver.Verdict
	}{
		{event("po_A-1", "initiated"), receiver.Apply},
		{event("po_A-2", "returned"), receiver.Apply},
		{event("po_A-3", "sent"), receiver.Stale}, // late retry of an older event
		{event("po_B-1", "failed"), receiver.Apply},
		{event("po_B-2", "sent"), receiver.Fetch},
	} {
		if got := handle(step.ev); got != step.want {
			t.Fatalf("%s %s: %s, want %s", step.ev.ID, step.ev.Type, got, step.want)
		}
	}
}

// TestGuardCustomRank: a merchant ordering the statuses of the event
// catalogue's payout payloads.
func TestGuardCustomRank(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, err := receiver.NewGuard(receiver.GuardConfig{Store: receiver.NewMemoryStatusStore(),
		Rank: []string{"created", "initiated", "paid"}, Kinds: []string{"payout"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Record(ctx, receiver.Resource{Kind: "payout", ID: "p", Status: "paid"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := g.Check(ctx, receiver.Resource{Kind: "payout", ID: "p", Status: "created"}); v != receiver.Stale {
		t.Errorf("created after paid: %s, want stale", v)
	}
	if v, _ := g.Check(ctx, receiver.Resource{Kind: "return", ID: "p", Status: "created"}); v != receiver.Apply {
		t.Errorf("a kind left out: %s, want apply", v)
	}
	if _, err := receiver.NewGuard(receiver.GuardConfig{Store: receiver.NewMemoryStatusStore(), Rank: []string{"a", "failed"}}); err == nil {
		t.Error("a status both ranked and a failure was accepted")
	}
	if _, err := receiver.NewGuard(receiver.GuardConfig{}); err == nil {
		t.Error("a guard without a store was accepted")
	}
}
