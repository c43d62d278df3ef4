package store_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
)

// A subscription's authentication is stored, read with the subscription and
// with its leased deliveries' subscription, replaced, left alone by an
// update that does not name it, and removed.
func TestSubscriptionAuthentication(t *testing.T) {
	st, ctx := newSubStore(t)
	notAfter := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	first := &store.Authentication{Sealed: []byte("sealed-mtls-1"), Summary: store.AuthenticationSummary{
		Type: "mtls", Subject: "CN=webhookd", Issuer: "CN=test CA", Serial: "42", NotAfter: &notAfter, ServerCA: true}}
	sub, err := st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/a",
		Events: []string{"*"}, Authentication: first}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Subscriptions.GetSubscription(ctx, "m1", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Authentication; a == nil || !bytes.Equal(a.Sealed, first.Sealed) || a.Summary.Subject != "CN=webhookd" ||
		!a.Summary.NotAfter.Equal(notAfter) || !a.Summary.ServerCA || a.Summary.Serial != "42" {
		t.Fatalf("read authentication %+v, want %+v", got.Authentication, first)
	}

	disabled := store.SubscriptionDisabled
	upd, err := st.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{Status: &disabled})
	if err != nil {
		t.Fatal(err)
	}
	if upd.Authentication == nil || !bytes.Equal(upd.Authentication.Sealed, first.Sealed) {
		t.Fatalf("an update not naming it changed the authentication: %+v", upd.Authentication)
	}

	second := &store.Authentication{Sealed: []byte("sealed-mtls-2"), Summary: store.AuthenticationSummary{Type: "mtls", Subject: "CN=next"}}
	upd, err = st.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{SetAuthentication: true, Authentication: second})
	if err != nil {
		t.Fatal(err)
	}
	if a := upd.Authentication; a == nil || !bytes.Equal(a.Sealed, second.Sealed) || a.Summary.ServerCA || a.Summary.NotAfter != nil {
		t.Fatalf("replaced authentication %+v, want %+v", upd.Authentication, second)
	}

	upd, err = st.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{SetAuthentication: true})
	if err != nil {
		t.Fatal(err)
	}
	if upd.Authentication != nil {
		t.Fatalf("removed authentication still read: %+v", upd.Authentication)
	}
}
