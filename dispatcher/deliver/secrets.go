package deliver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// SecretCache keeps each subscription's opened signing secrets, so that an
// attempt costs neither a query nor a decryption. An entry is keyed by the
// subscription's version (its updated_at, which every change, rotations
// included, moves), so a rotated subscription is read again at its next
// attempt: signatures always come from the secrets active now. Which of
// the cached secrets are active is decided at each attempt, so expiries
// take effect to the instant.
type SecretCache struct {
	store  *store.Store
	sealer *signer.Sealer
	mu     sync.Mutex
	cache  map[uuid.UUID]cachedSecrets
	// encryption keeps the subscriptions' parsed encryption keys.
	encryption encryptionKeys
}

type cachedSecrets struct {
	version time.Time
	secrets []signer.Secret
	used    time.Time
}

// maxCachedSubscriptions bounds the cache; past it, entries unused for a
// minute are dropped.
const maxCachedSubscriptions = 10_000

// NewSecretCache returns an empty cache of the signing keys in st,
// opened with sealer.
func NewSecretCache(st *store.Store, sealer *signer.Sealer) *SecretCache {
	return &SecretCache{store: st, sealer: sealer, cache: make(map[uuid.UUID]cachedSecrets)}
}

// Keys returns the signing keys of the subscription active at now, of
// either scheme, the current one first. version is the subscription's
// updated_at as the lease read it.
func (c *SecretCache) Keys(ctx context.Context, subID uuid.UUID, version, now time.Time) ([]signer.SigningKey, error) {
	c.mu.Lock()
	e, ok := c.cache[subID]
	c.mu.Unlock()
	if !ok || !e.version.Equal(version) {
		secrets, err := c.load(ctx, subID)
		if err != nil {
			return nil, err
		}
		e = cachedSecrets{version: version, secrets: secrets}
	}
	e.used = now
	c.mu.Lock()
	if len(c.cache) >= maxCachedSubscriptions {
		for id, old := range c.cache {
			if now.Sub(old.used) > time.Minute {
				delete(c.cache, id)
			}
		}
	}
	c.cache[subID] = e
	c.mu.Unlock()

	keys, err := signer.SigningKeys(signer.Active(e.secrets, now))
	if err != nil {
		return nil, fmt.Errorf("signing keys of subscription %s: %w", subID, err)
	}
	if len(keys) == 0 {
		// Never send an unsigned webhook.
		return nil, fmt.Errorf("subscription %s has no active signing secret", subID)
	}
	return keys, nil
}

// load reads and opens the subscription's unexpired secrets.
func (c *SecretCache) load(ctx context.Context, subID uuid.UUID) ([]signer.Secret, error) {
	stored, err := c.store.SigningSecrets(ctx, subID)
	if err != nil {
		return nil, err
	}
	secrets := make([]signer.Secret, 0, len(stored))
	for _, s := range stored {
		v, err := c.sealer.Open(s.Ciphertext)
		if err != nil {
			return nil, fmt.Errorf("open secret %d of subscription %s: %w", s.ID, subID, err)
		}
		secrets = append(secrets, signer.Secret{ID: s.ID, Value: v, CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt})
	}
	return secrets, nil
}
