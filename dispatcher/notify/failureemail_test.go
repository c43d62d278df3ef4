package notify_test

import (
	"context"
	"io"
	"mime/quotedprintable"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/dispatcher/notify"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/internal/testfixtures/smtpsink"
)

// countingNotifier counts the calls that returned, so that a test knows
// the notifier has finished with a delivery.
type countingNotifier struct {
	inner deliver.Notifier
	calls atomic.Int32
}

func (c *countingNotifier) DeliveryFailed(ctx context.Context, d store.Delivery) {
	c.inner.DeliveryFailed(ctx, d)
	c.calls.Add(1)
}

// TestFailureEmailOncePerSubscriptionPerHour: two real deliveries to one
// subscription fail for good within the hour and the merchant gets exactly
// one e-mail; a failing test delivery sends none.
func TestFailureEmailOncePerSubscriptionPerHour(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	ctx := context.Background()
	sink := smtpsink.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusInternalServerError))
	failing, _ := e.Subscribe("m1", rcv.URL+"/a", "*")
	testOnly, _ := e.Subscribe("m1", rcv.URL+"/b", "payout.created")
	email := "ops@merchant.example"
	if _, err := e.Store.Merchants.UpdateMerchant(ctx, "m1", dispatchertest.TestVersion, store.MerchantSettings{NotificationEmail: &email}); err != nil {
		t.Fatal(err)
	}
	mailer, err := notify.NewMailer(sink.URL(), "webhookd@example.com", e.Store.EndpointHealth, e.Cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	counter := &countingNotifier{inner: mailer}
	d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.Notifier = counter })
	e.Run(d)

	// A test delivery to the other subscription fails for good first.
	td, err := d.Publisher.SendTestEvent(ctx, "m1", testOnly.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.WaitSettled(td.ID, 5*time.Second); got.Status != store.DeliveryFailed {
		t.Fatalf("test delivery %s, want failed", got.Status)
	}

	// Then two real events to the failing one.
	for range 2 {
		ev := e.Publish(d, "m1", "payout.paid")
		for _, del := range e.Deliveries(ev.ID) {
			if del.SubscriptionID != failing.ID {
				t.Fatalf("event delivered to %s", del.SubscriptionID)
			}
			if got := e.WaitSettled(del.ID, 5*time.Second); got.Status != store.DeliveryFailed {
				t.Fatalf("delivery %s, want failed", got.Status)
			}
		}
	}
	e.WaitFor("the notifier to hear of both failures", 5*time.Second, func() bool { return counter.calls.Load() >= 2 })
	if n := counter.calls.Load(); n != 2 {
		t.Fatalf("notifier called %d times, want 2 (never for the test delivery)", n)
	}
	msgs := sink.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d e-mails, want exactly 1", len(msgs))
	}
	m := msgs[0]
	if len(m.To) != 1 || !strings.Contains(m.To[0], email) {
		t.Errorf("recipients %v, want %s", m.To, email)
	}
	// The body is quoted-printable: long lines (the URL) are folded.
	body, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(m.Data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"payout.paid", failing.URL, failing.ID.String(), "redeliver"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("e-mail lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(m.Data, "ping.test") {
		t.Errorf("the e-mail is about the test delivery:\n%s", m.Data)
	}

	// Called directly with a test delivery, the notifier sends nothing and
	// claims nothing.
	mailer.DeliveryFailed(ctx, store.Delivery{ID: td.ID, SubscriptionID: testOnly.ID, MerchantID: "m1", Test: true})
	if n := len(sink.Messages()); n != 1 {
		t.Fatalf("%d e-mails after a test delivery, want still 1", n)
	}
	if _, err := e.Store.EndpointHealth.ClaimFailureNotification(ctx, testOnly.ID, notify.NotifyInterval); err != nil {
		t.Fatalf("the test delivery took the e-mail claim: %v", err)
	}
}
