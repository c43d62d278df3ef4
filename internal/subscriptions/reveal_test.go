package subscriptions_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

func TestReveal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, st := registry(t, subscriptions.Rules{EventTypes: catalogue()}, "m_reveal")
	sub, first, err := reg.Create(ctx, "m_reveal", subscriptions.Draft{URL: ptr("https://example.com/h"), Events: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	reveal := func(merchant string) (subscriptions.Revealed, error) {
		return subscriptions.NewSecretRevealer(st.Subscriptions, masterKey(), func() time.Time { return at }).Reveal(ctx, merchant, sub.ID)
	}

	got, err := reveal("m_reveal")
	if err != nil || got.Secret != first || got.PreviousExpiresAt != nil {
		t.Fatalf("before a rotation: %+v, %v; want the first secret alone", got, err)
	}
	if _, err := reveal("m_stranger"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another merchant's reveal: %v, want ErrNotFound", err)
	}

	_, second, err := reg.RotateSecret(ctx, "m_reveal", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	at = time.Now()
	got, err = reveal("m_reveal")
	if err != nil || got.Secret != second || got.PreviousExpiresAt == nil {
		t.Fatalf("after a rotation: %+v, %v; want the new secret and the previous one's expiry", got, err)
	}
	if d := got.PreviousExpiresAt.Sub(at); d > signer.RotationOverlap || d < signer.RotationOverlap-time.Minute {
		t.Errorf("the previous secret expires %v after now, want %v", d, signer.RotationOverlap)
	}

	// Once the overlap is over, the new secret signs alone.
	at = at.Add(signer.RotationOverlap + time.Second)
	if got, err = reveal("m_reveal"); err != nil || got.Secret != second || got.PreviousExpiresAt != nil {
		t.Fatalf("after the overlap: %+v, %v; want the new secret alone", got, err)
	}
}
