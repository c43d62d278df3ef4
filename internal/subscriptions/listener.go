package subscriptions

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// MaxListeners is how many listeners (`webhookd listen` connections) one
// merchant may hold at once: enough for a team, too few for a leak of
// connections to fill the table.
const MaxListeners = 10

// OpenListener checks the events list (none is every type), and stores a
// listener subscription of the merchant, live until expiresAt, signed with
// ListenerSecret of the API key that opens it. It returns the listener and
// the secret in clear.
func (g *Registry) OpenListener(ctx context.Context, merchantID string, keyID uuid.UUID, events []string, expiresAt time.Time) (store.Listener, string, error) {
	if len(events) == 0 {
		events = []string{wildcardEvent}
	}
	events, err := g.check.events("events", events)
	if err != nil {
		return store.Listener{}, "", err
	}
	secret, err := g.ListenerSecret(keyID)
	if err != nil {
		return store.Listener{}, "", err
	}
	sealer, err := signer.NewSealer(g.masterKey)
	if err != nil {
		return store.Listener{}, "", fmt.Errorf("signing secret: %w", err)
	}
	sealed, err := sealer.Seal(secret)
	if err != nil {
		return store.Listener{}, "", fmt.Errorf("signing secret: %w", err)
	}
	l, err := g.listeners.CreateListener(ctx, store.NewListener{MerchantID: merchantID, Events: events, ExpiresAt: expiresAt,
		Limit: MaxListeners}, sealed)
	if errors.Is(err, store.ErrListenerLimit) {
		return store.Listener{}, "", invalid.Value("listener", "listeners_limit", fmt.Sprintf(
			"A merchant may hold at most %d listeners at once; stop one `webhookd listen` first.", MaxListeners))
	}
	if err != nil {
		return store.Listener{}, "", err
	}
	return l, secret, nil
}

// ListenerSecret is the signing secret of every listener an API key opens.
// It is derived from the key's id with the master key, so that it stays
// the same from one `webhookd listen` to the next: a developer configures
// it once in the local application (`webhookd listen --print-secret`).
func (g *Registry) ListenerSecret(keyID uuid.UUID) (string, error) {
	if len(g.masterKey) != 32 {
		return "", errors.New("signing secret: the master key must be 32 bytes")
	}
	mac := hmac.New(sha256.New, g.masterKey)
	mac.Write([]byte("webhookd listener secret\x00"))
	mac.Write(keyID[:])
	return signer.SecretPrefix + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}
