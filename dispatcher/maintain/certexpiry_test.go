package maintain

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/notify"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/smtpsink"
)

// TestCertExpiryWarnsOncePerCertificate: the merchant is e-mailed 14 days
// before an mtls client certificate expires, once for that certificate
// however often the job runs; a new certificate is warned about in its
// turn; certificates far from expiry and other authentications are left
// alone.
func TestCertExpiryWarnsOncePerCertificate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	email := "security@merchant.example"
	sink, mailer := mailedMerchant(t, st, "m1", email)
	start := time.Now().UTC().Truncate(time.Second)
	mtls := func(serial string, notAfter time.Time) *store.Authentication {
		return &store.Authentication{Sealed: []byte("sealed"), Summary: store.AuthenticationSummary{Type: "mtls",
			Subject: "CN=webhookd,O=Merchant", Issuer: "CN=Merchant CA", Serial: serial, NotAfter: &notAfter}}
	}
	create := func(url string, auth *store.Authentication) uuid.UUID {
		t.Helper()
		sub, err := st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: url, Events: []string{"*"},
			Authentication: auth}, []byte("sealed"))
		if err != nil {
			t.Fatal(err)
		}
		return sub.ID
	}
	soon := create("https://soon.example/hooks", mtls("101", start.Add(20*24*time.Hour)))
	later := create("https://later.example/hooks", mtls("202", start.Add(60*24*time.Hour)))
	create("https://plain.example/hooks", nil)
	create("https://oauth.example/hooks", &store.Authentication{Sealed: []byte("sealed"),
		Summary: store.AuthenticationSummary{Type: "oauth2_client_credentials", TokenURL: "https://auth.example/token"}})

	var now time.Time
	job, err := NewCertExpiry(CertExpiryConfig{Store: st.EndpointHealth, Notifier: mailer,
		Runtime: Runtime{Clock: clock.Func(func() time.Time { return now })}})
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		at     time.Duration
		before func()
		warned []uuid.UUID
	}{
		{"three weeks ahead: nothing yet", 0, nil, nil},
		{"thirteen days ahead", 7 * 24 * time.Hour, nil, []uuid.UUID{soon}},
		{"again: told already", 8 * 24 * time.Hour, nil, nil},
		{"a new certificate", 9 * 24 * time.Hour, func() {
			if _, err := st.Subscriptions.UpdateSubscription(ctx, "m1", soon, store.SubscriptionUpdate{SetAuthentication: true,
				Authentication: mtls("303", start.Add(15*24*time.Hour))}); err != nil {
				t.Fatal(err)
			}
		}, []uuid.UUID{soon}},
		{"the other one's turn", 47 * 24 * time.Hour, nil, []uuid.UUID{later}},
		{"after every expiry: nothing new", 90 * 24 * time.Hour, nil, nil},
	} {
		if tc.before != nil {
			tc.before()
		}
		now = start.Add(tc.at)
		got, err := job.warn(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(got) != len(tc.warned) || (len(got) == 1 && got[0].SubscriptionID != tc.warned[0]) {
			t.Fatalf("%s: warned %+v, want %v", tc.name, got, tc.warned)
		}
	}

	msgs := sink.Messages()
	if len(msgs) != 3 {
		t.Fatalf("%d e-mails, want one per certificate", len(msgs))
	}
	body := decodeQP(t, msgs[0].Data)
	for _, want := range []string{"Webhook client certificate expires soon: soon.example", "13 days", "CN=webhookd,O=Merchant",
		"CN=Merchant CA", "101", soon.String(), "authentication"} {
		if !strings.Contains(body, want) {
			t.Errorf("e-mail lacks %q:\n%s", want, body)
		}
	}
	if body := decodeQP(t, msgs[1].Data); !strings.Contains(body, "303") || !strings.Contains(body, "6 days") {
		t.Errorf("the new certificate's e-mail:\n%s", body)
	}
	if msgs[0].To[0] != "<"+email+">" && !strings.Contains(msgs[0].To[0], email) {
		t.Errorf("sent to %v", msgs[0].To)
	}
}

// mailedMerchant makes merchant, whose notification address is email, and
// the Mailer that e-mails it, through an SMTP sink.
func mailedMerchant(t *testing.T, st *store.Store, merchant, email string) (*smtpsink.Sink, *notify.Mailer) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Merchants.EnsureMerchant(ctx, merchant, "2026-05-01"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Merchants.UpdateMerchant(ctx, merchant, "2026-05-01", store.MerchantSettings{NotificationEmail: &email}); err != nil {
		t.Fatal(err)
	}
	sink := smtpsink.New(t)
	mailer, err := notify.NewMailer(sink.URL(), "webhookd@example.com", st.EndpointHealth, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return sink, mailer
}
