package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// world is one merchant's subscriptions, one of each kind a fan-out
// treats apart, named by their role so that two worlds can be compared.
type world struct {
	merchant string
	roles    map[uuid.UUID]string
	filtered uuid.UUID
}

// newWorld stores a merchant with an endpoint for every type, one ordered
// by payload.k, one with a filter, a disabled endpoint (its deliveries
// are skipped), one for another type only, and a poll subscription.
func newWorld(t *testing.T, s *store.Store, merchant string) world {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Merchants.EnsureMerchant(ctx, merchant, "2026-05-01"); err != nil {
		t.Fatal(err)
	}
	w := world{merchant: merchant, roles: map[uuid.UUID]string{}}
	key, filter := "payload.k", `type == "payout.paid"`
	for _, role := range []struct {
		name string
		sub  store.NewSubscription
	}{
		{"every", store.NewSubscription{Events: []string{"*"}}},
		{"ordered", store.NewSubscription{Events: []string{"*"}, OrderingKey: &key}},
		{"filtered", store.NewSubscription{Events: []string{"*"}, Filter: &filter}},
		{"disabled", store.NewSubscription{Events: []string{"*"}}},
		{"other type", store.NewSubscription{Events: []string{"payout.failed"}}},
		{"poll", store.NewSubscription{Events: []string{"*"}, Destination: &store.Destination{Sealed: []byte("sealed"),
			Summary: map[string]any{"type": store.DestinationPoll}}}},
	} {
		role.sub.MerchantID, role.sub.URL = merchant, "https://example.com/"+merchant
		if role.sub.Destination != nil {
			role.sub.URL = ""
		}
		sub, err := s.Subscriptions.CreateSubscription(ctx, role.sub, []byte("sealed"))
		if err != nil {
			t.Fatalf("%s: %v", role.name, err)
		}
		w.roles[sub.ID] = role.name
		switch role.name {
		case "filtered":
			w.filtered = sub.ID
		case "disabled":
			disabled := store.SubscriptionDisabled
			if _, err := s.Subscriptions.UpdateSubscription(ctx, merchant, sub.ID, store.SubscriptionUpdate{Status: &disabled}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return w
}

// TestCreateFanOutsAsOneByOne: a group of fan-outs written with one
// statement stores exactly what one statement per event stores, in the
// group's order: which writes create their event (the first of an id in
// the group, none of an id already stored), which subscriptions get a
// delivery and in what status, the sequences of ordered keys (a key busy
// before the group, a key new in the group, a key several events share)
// and which of them are due (and leased, when the writes ask for a lease),
// the positions of the poll line, and the commit group's bytes at the end
// of every delivery id.
func TestCreateFanOutsAsOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	reference, grouped := newWorld(t, s, "one-by-one"), newWorld(t, s, "grouped")
	now := time.Now().UTC().Truncate(time.Millisecond)
	leaseUntil := now.Add(time.Minute).Truncate(time.Microsecond)
	event := func(w world, id uuid.UUID, typ, key string) store.Event {
		body := fmt.Sprintf(`{"type":%q,"payload":{"k":%q}}`, typ, key)
		return store.Event{ID: id, MerchantID: w.merchant, Type: typ, APIVersion: "2026-05-01", Body: []byte(body), CreatedAt: now}
	}
	// The same ids in both worlds would collide: each world's ids are its
	// own, named alike.
	ids := map[string]map[string]uuid.UUID{}
	idOf := func(w world, name string) uuid.UUID {
		if ids[w.merchant] == nil {
			ids[w.merchant] = map[string]uuid.UUID{}
		}
		id, ok := ids[w.merchant][name]
		if !ok {
			id = uuid.New()
			ids[w.merchant][name] = id
		}
		return id
	}
	type write struct {
		id, typ, key string
		matched      bool // passed the filtered subscription's filter
	}
	before := []write{{"busy", "payout.paid", "a", true}, {"stored", "payout.paid", "z", false}}
	group := []write{
		{"e1", "payout.paid", "a", true},   // behind the busy key
		{"e2", "payout.paid", "b", false},  // a new key: due
		{"e3", "payout.failed", "b", true}, // the same key, behind e2
		{"e1", "payout.paid", "a", true},   // e1's id again in the group
		{"stored", "payout.paid", "z", false},
		{"e4", "account.updated", "", true}, // no key value: unordered
		{"e5", "payout.paid", "c", false},
		{"e6", "payout.paid", "b", true},
	}
	writesOf := func(w world, ws []write) []store.EventWrite {
		out := make([]store.EventWrite, len(ws))
		for i, x := range ws {
			out[i] = store.EventWrite{Event: event(w, idOf(w, x.id), x.typ, x.key), LeaseUntil: leaseUntil}
			if x.matched {
				out[i].To.Matched = []uuid.UUID{w.filtered}
			}
		}
		return out
	}
	for _, w := range []world{reference, grouped} {
		for _, ev := range writesOf(w, before) {
			if _, _, _, err := s.Events.CreateEvent(ctx, ev.Event, ev.To); err != nil {
				t.Fatal(err)
			}
		}
	}
	bytes, err := store.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.Events.CreateEventsOneStatementEach(ctx, writesOf(reference, group), bytes)
	if err != nil {
		t.Fatal(err)
	}
	got, errs, err := s.Events.CreateEvents(ctx, writesOf(grouped, group), bytes)
	if err != nil {
		t.Fatal(err)
	}
	describe := func(w world, out store.EventWritten) map[string]string {
		m := map[string]string{"created": fmt.Sprint(out.Created)}
		for _, d := range out.Deliveries {
			role := w.roles[d.SubscriptionID]
			leased := "no"
			if l, ok := out.Leased[d.ID]; ok {
				leased = fmt.Sprintf("until %v, %s, body %s", l.LeaseUntil.Equal(leaseUntil), l.SubscriptionStatus, l.Body)
			}
			m[role] = fmt.Sprintf("status %s, due %v, key %v, sequence %v, position %v, group %v, leased %s", d.Status,
				d.NextAttemptAt != nil, derefString(d.OrderingKey), deref(d.Sequence), deref(d.PollPosition),
				string(store.DeliveryGroup(d.ID)) == string(bytes), leased)
		}
		return m
	}
	for i, x := range group {
		if errs[i] != nil {
			t.Errorf("write %d (%s): %v", i, x.id, errs[i])
			continue
		}
		w, g := describe(reference, want[i]), describe(grouped, got[i])
		if fmt.Sprint(w) != fmt.Sprint(g) {
			t.Errorf("write %d (%s):\n one by one %v\n grouped    %v", i, x.id, w, g)
		}
	}
	if t.Failed() {
		return
	}
	// What the one-by-one reference stored is what ordering and the poll
	// line promise; spot-check it so that both being wrong alike fails too.
	if d := describe(reference, want[2]); d["ordered"] != "status pending, due false, key b, sequence 2, position 0, group true, leased no" {
		t.Errorf("e3 to the ordered subscription: %s", d["ordered"])
	}
	if d := describe(reference, want[1]); d["ordered"] != "status pending, due true, key b, sequence 1, position 0, group true, leased until true, enabled, body "+
		`{"type":"payout.paid","payload":{"k":"b"}}` {
		t.Errorf("e2 to the ordered subscription: %s", d["ordered"])
	}
	if d := describe(reference, want[7]); d["poll"] != "status pending, due false, key <nil>, sequence 0, position 8, group true, leased no" {
		t.Errorf("e6 to the poll line: %s", d["poll"])
	}
}

func derefString(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
