package store_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// A subscription's signature scheme, its secrets' public keys and its
// encryption key are stored and read with it: the public keys of the two
// newest secrets, newest first, with their expiry, in the answers of
// create and rotate too; the encryption key is set, left alone, removed,
// and comes with the lease.
func TestSubscriptionSigningAndEncryption(t *testing.T) {
	clock := newTestClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	st, ctx := newSubStore(t, store.WithClock(clock.Now))
	plain, err := st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/a",
		Events: []string{"*"}}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	if plain.SignatureScheme != store.SchemeHMACSHA256 || len(plain.SigningPublicKeys) != 0 || plain.EncryptionKey != nil {
		t.Fatalf("default subscription: scheme %q, keys %v, encryption %s", plain.SignatureScheme, plain.SigningPublicKeys, plain.EncryptionKey)
	}

	jwk := []byte(`{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}`)
	firstKey := "whpk_first"
	sub, err := st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/b", Events: []string{"*"},
		SignatureScheme: store.SchemeEd25519, SigningPublicKey: &firstKey, EncryptionKey: jwk}, []byte("sealed-whsk"))
	if err != nil {
		t.Fatal(err)
	}
	keys := func(step string, s store.Subscription, want ...string) {
		t.Helper()
		var got []string
		for _, k := range s.SigningPublicKeys {
			got = append(got, k.PublicKey)
		}
		if s.SignatureScheme != store.SchemeEd25519 || len(got) != len(want) {
			t.Fatalf("%s: scheme %q, public keys %v, want %v", step, s.SignatureScheme, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: public keys %v, want %v", step, got, want)
			}
		}
	}
	keys("create", sub, firstKey)
	if !jsonEqual(t, sub.EncryptionKey, jwk) {
		t.Fatalf("create: encryption key %s", sub.EncryptionKey)
	}

	secondKey := "whpk_second"
	newSecret, err := signer.NewSigningSecret(signer.SchemeEd25519)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := st.Subscriptions.RotateSigningSecret(ctx, "m1", sub.ID, []byte("sealed-whsk-2"), &secondKey, subscriptions.Rotation(newSecret))
	if err != nil {
		t.Fatal(err)
	}
	keys("rotate", rotated, secondKey, firstKey)
	if rotated.SigningPublicKeys[0].ExpiresAt != nil || rotated.SigningPublicKeys[1].ExpiresAt == nil {
		t.Fatalf("rotate: expiries %+v", rotated.SigningPublicKeys)
	}
	got, err := st.Subscriptions.GetSubscription(ctx, "m1", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	keys("read", got, secondKey, firstKey)

	disabled := store.SubscriptionDisabled
	upd, err := st.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{Status: &disabled})
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, upd.EncryptionKey, jwk) {
		t.Fatalf("an update not naming it changed the encryption key: %s", upd.EncryptionKey)
	}
	upd, err = st.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{SetEncryptionKey: true})
	if err != nil {
		t.Fatal(err)
	}
	if upd.EncryptionKey != nil {
		t.Fatalf("removed encryption key still read: %s", upd.EncryptionKey)
	}
	keys("update", upd, secondKey, firstKey)
	upd, err = st.Subscriptions.UpdateSubscription(ctx, "m1", plain.ID, store.SubscriptionUpdate{SetEncryptionKey: true, EncryptionKey: jwk})
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, upd.EncryptionKey, jwk) || upd.SignatureScheme != store.SchemeHMACSHA256 {
		t.Fatalf("set encryption key: %s, scheme %q", upd.EncryptionKey, upd.SignatureScheme)
	}
}

// jsonEqual says whether a and b are the same JSON value (jsonb keeps
// neither spacing nor key order).
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		return false
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}
