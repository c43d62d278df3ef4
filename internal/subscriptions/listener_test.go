package subscriptions_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// TestListenerSecretIsTheKeys checks that a key's listeners share one
// secret, that the secret signs them as stored, and that another key's
// differs.
func TestListenerSecretIsTheKeys(t *testing.T) {
	t.Parallel()
	g, st := registry(t, subscriptions.Rules{EventTypes: catalogue()}, "m1")
	ctx := context.Background()
	key, other := uuid.New(), uuid.New()
	l, secret, err := g.OpenListener(ctx, "m1", key, nil, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Events) != 1 || l.Events[0] != "*" {
		t.Errorf("events = %v, want every type", l.Events)
	}
	if _, err := signer.ParseSecret(secret); err != nil {
		t.Fatalf("secret %q: %v", secret, err)
	}
	again, err := g.ListenerSecret(key)
	if err != nil || again != secret {
		t.Errorf("ListenerSecret(key) = %v, want the listener's", err)
	}
	if theirs, _ := g.ListenerSecret(other); theirs == secret {
		t.Error("two keys share a listener secret")
	}
	sealed, err := st.Subscriptions.SigningSecrets(ctx, l.ID)
	if err != nil || len(sealed) != 1 {
		t.Fatalf("stored secrets = %d, %v", len(sealed), err)
	}
	sealer, _ := signer.NewSealer(masterKey())
	if opened, err := sealer.Open(sealed[0].Ciphertext); err != nil || opened != secret {
		t.Errorf("the stored secret is not the one returned (%v)", err)
	}
}

// TestOpenListenerRules checks the events rules and the cap of listeners.
func TestOpenListenerRules(t *testing.T) {
	t.Parallel()
	g, _ := registry(t, subscriptions.Rules{EventTypes: catalogue()}, "m1")
	ctx := context.Background()
	_, _, err := g.OpenListener(ctx, "m1", uuid.New(), []string{"payout.lost"}, time.Now().Add(time.Minute))
	if bad := invalid.As(err); bad == nil || bad.Param != "events" {
		t.Errorf("unknown type = %v, want events refused", err)
	}
	for range subscriptions.MaxListeners {
		if _, _, err := g.OpenListener(ctx, "m1", uuid.New(), []string{"payout.paid"}, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = g.OpenListener(ctx, "m1", uuid.New(), nil, time.Now().Add(time.Minute))
	if bad := invalid.As(err); bad == nil || bad.Rule != "listeners_limit" || errors.Is(err, store.ErrListenerLimit) {
		t.Errorf("one listener too many = %v, want listeners_limit", err)
	}
}
