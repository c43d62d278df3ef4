package maintain

import (
	"context"
	"io"
	"log/slog"
	"mime/quotedprintable"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestAutoDisableAfterFailingLong: a subscription whose every attempt has
// failed is left alone until AutoDisableAfter has passed since its first
// failure, then disabled once, with an e-mail to the merchant saying so; a
// success in between starts the count again, and enabling it again does
// too.
func TestAutoDisableAfterFailingLong(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	start := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := st.Maintenance.EnsurePartitions(ctx, start, store.PartitionsAhead); err != nil {
		t.Fatal(err)
	}
	sink, mailer := mailedMerchant(t, st, "m1", "ops@merchant.example")
	failing := newSub(t, st, "https://failing.example/hooks")
	recovered := newSub(t, st, "https://recovered.example/hooks")

	// failing fails at start and 50 h later; recovered fails at start,
	// succeeds 50 h later and fails again at 60 h.
	attempt(t, st, failing, start, false)
	attempt(t, st, failing, start.Add(50*time.Hour), false)
	attempt(t, st, recovered, start, false)
	attempt(t, st, recovered, start.Add(50*time.Hour), true)
	attempt(t, st, recovered, start.Add(60*time.Hour), false)

	var now time.Time
	a := &AutoDisabler{cfg: AutoDisablerConfig{Store: st.EndpointHealth, After: 120 * time.Hour, Notifier: mailer},
		clock: clock.Func(func() time.Time { return now }), logger: slog.New(slog.DiscardHandler)}
	if err := a.cfg.validate(); err != nil {
		t.Fatal(err)
	}
	status := func(id uuid.UUID) store.SubscriptionStatus {
		t.Helper()
		sub, err := st.Subscriptions.GetSubscription(ctx, "m1", id)
		if err != nil {
			t.Fatal(err)
		}
		return sub.Status
	}

	for _, tc := range []struct {
		name                 string
		at                   time.Duration
		disabled             []uuid.UUID
		failingStatus, other store.SubscriptionStatus
	}{
		{"just short of the limit", 119 * time.Hour, nil, store.SubscriptionEnabled, store.SubscriptionEnabled},
		{"past the limit of the first failure", 121 * time.Hour, []uuid.UUID{failing}, store.SubscriptionDisabled, store.SubscriptionEnabled},
		{"again: nothing new", 122 * time.Hour, nil, store.SubscriptionDisabled, store.SubscriptionEnabled},
		{"past the limit counted from after the success", 181 * time.Hour, []uuid.UUID{recovered}, store.SubscriptionDisabled, store.SubscriptionDisabled},
	} {
		now = start.Add(tc.at)
		got, err := a.disable(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var ids []uuid.UUID
		for _, d := range got {
			ids = append(ids, d.SubscriptionID)
		}
		if len(ids) != len(tc.disabled) || (len(ids) == 1 && ids[0] != tc.disabled[0]) {
			t.Fatalf("%s: disabled %v, want %v", tc.name, ids, tc.disabled)
		}
		if s := status(failing); s != tc.failingStatus {
			t.Fatalf("%s: failing is %s, want %s", tc.name, s, tc.failingStatus)
		}
		if s := status(recovered); s != tc.other {
			t.Fatalf("%s: recovered is %s, want %s", tc.name, s, tc.other)
		}
	}

	msgs := sink.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d e-mails, want one per subscription disabled", len(msgs))
	}
	body := decodeQP(t, msgs[0].Data)
	for _, want := range []string{"Webhook endpoint disabled: failing.example", "has been disabled", "5 days", failing.String(), "skipped", "/recover"} {
		if !strings.Contains(body, want) {
			t.Errorf("e-mail lacks %q:\n%s", want, body)
		}
	}

	// Enabled again by the merchant: its run of failures starts afresh.
	enabled := store.SubscriptionEnabled
	if _, err := st.Subscriptions.UpdateSubscription(ctx, "m1", failing, store.SubscriptionUpdate{Status: &enabled}); err != nil {
		t.Fatal(err)
	}
	now = start.Add(300 * time.Hour)
	if got, err := a.disable(ctx); err != nil || len(got) != 0 {
		t.Fatalf("re-enabled subscription disabled again at once: %v %v", got, err)
	}
}

func newSub(t *testing.T, st *store.Store, url string) uuid.UUID {
	t.Helper()
	sub, err := st.Subscriptions.CreateSubscription(context.Background(), store.NewSubscription{MerchantID: "m1", URL: url, Events: []string{"*"}}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	return sub.ID
}

// attempt records one attempt of a new delivery to sub at the instant at.
func attempt(t *testing.T, st *store.Store, sub uuid.UUID, at time.Time, ok bool) {
	t.Helper()
	ctx := context.Background()
	created := time.Now().UTC().Truncate(time.Millisecond)
	id, err := uuid.NewV7() // dated now, as created is
	if err != nil {
		t.Fatal(err)
	}
	_, ds, _, err := st.Events.CreateEvent(ctx, store.Event{ID: id, MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01",
		Body: []byte(`{}`), CreatedAt: created}, store.Audience{SubscriptionID: &sub})
	if err != nil || len(ds) != 1 {
		t.Fatalf("create event: %v (%d deliveries)", err, len(ds))
	}
	status, dstatus := store.AttemptFailed, store.DeliveryFailed
	if ok {
		status, dstatus = store.AttemptSucceeded, store.DeliverySucceeded
	}
	if err := st.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: ds[0], Status: dstatus,
		Attempt: store.Attempt{Number: 1, Status: status, Trigger: store.TriggerScheduled, AttemptedAt: at}}); err != nil {
		t.Fatal(err)
	}
}

// decodeQP reads a message whose body is quoted-printable.
func decodeQP(t *testing.T, data string) string {
	t.Helper()
	b, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(data)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
