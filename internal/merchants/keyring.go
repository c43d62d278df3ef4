package merchants

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// The bounds of a roll's overlap: how long the old key keeps working next
// to its successor.
const (
	// DefaultRollOverlap gives every caller of the old key a day to move.
	DefaultRollOverlap = 24 * time.Hour
	// MaxRollOverlap keeps a key that was rolled, because it may have
	// leaked, from living on for long.
	MaxRollOverlap = 30 * 24 * time.Hour
)

// The rules a key id or a roll's overlap may break.
const (
	RuleKeyIDMalformed = "key_id_malformed"
	RuleOverlapRange   = "overlap_out_of_range"
)

// KeyUsable tells whether a stored key may authenticate a request at now:
// not revoked, and, once rolled, not past its expiry.
func KeyUsable(k store.APIKey, now time.Time) bool {
	return k.RevokedAt == nil && (k.ExpiresAt == nil || now.Before(*k.ExpiresAt))
}

// The statuses of a key, as KeyStatus names them.
const (
	KeyActive   = "active"
	KeyExpiring = "expiring"
	KeyExpired  = "expired"
	KeyRevoked  = "revoked"
)

// KeyStatus names where a key is in its life at now: active; expiring
// (rolled, still working until its expiry); expired; or revoked.
func KeyStatus(k store.APIKey, now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return KeyRevoked
	case k.ExpiresAt == nil:
		return KeyActive
	case now.Before(*k.ExpiresAt):
		return KeyExpiring
	}
	return KeyExpired
}

// KeyRingStore is what a KeyRing needs of the database.
type KeyRingStore interface {
	// ListAPIKeys returns the merchant's keys, newest first.
	ListAPIKeysPage(ctx context.Context, merchantID string, p store.Page) ([]store.APIKey, error)
	// GetAPIKey returns one key of the merchant, or store.ErrNotFound.
	GetAPIKey(ctx context.Context, merchantID string, id uuid.UUID) (store.APIKey, error)
	// RevokeAPIKey revokes one key of the merchant now.
	RevokeAPIKey(ctx context.Context, merchantID string, id uuid.UUID) (store.APIKey, error)
	// RollAPIKey stores newKey as the key's successor and makes the key
	// expire at expiresAt, if mayRoll allows it under the key's lock.
	RollAPIKey(ctx context.Context, merchantID string, id uuid.UUID, newKey string, expiresAt time.Time, mayRoll store.RollRule) (store.APIKey, error)
	// Now is the clock.
	Now() time.Time
}

// KeyRing manages the keys a merchant holds: lists, revokes and rolls
// them. Issuing is the KeyIssuer's.
type KeyRing struct {
	store KeyRingStore
}

// NewKeyRing is a KeyRing on st.
func NewKeyRing(st KeyRingStore) *KeyRing { return &KeyRing{store: st} }

// List returns one page of the merchant's keys, revoked and expired ones
// included, newest first; never a key itself, which webhookd does not keep.
func (r *KeyRing) List(ctx context.Context, merchantID string, p store.Page) ([]store.APIKey, error) {
	if err := CheckID("merchant_id", merchantID); err != nil {
		return nil, err
	}
	return r.store.ListAPIKeysPage(ctx, merchantID, p)
}

// Revoke ends one key of the merchant at once. Another merchant's key, or
// none, is store.ErrNotFound; revoking a revoked key changes nothing.
func (r *KeyRing) Revoke(ctx context.Context, merchantID, keyID string) (store.APIKey, error) {
	id, err := checkKey(merchantID, keyID)
	if err != nil {
		return store.APIKey{}, err
	}
	return r.store.RevokeAPIKey(ctx, merchantID, id)
}

// Roll gives one key of the merchant a successor with the same environment
// and scopes, and lets the old key work overlapSeconds more (nil means
// DefaultRollOverlap; zero ends it now). A key revoked, expired or already
// rolled is store.ErrAPIKeyInactive.
func (r *KeyRing) Roll(ctx context.Context, merchantID, keyID string, overlapSeconds *int64) (IssuedKey, error) {
	id, err := checkKey(merchantID, keyID)
	if err != nil {
		return IssuedKey{}, err
	}
	keep := DefaultRollOverlap
	if overlapSeconds != nil {
		// Compared in seconds first: a huge count would overflow a Duration.
		if *overlapSeconds < 0 || *overlapSeconds > int64(MaxRollOverlap/time.Second) {
			return IssuedKey{}, invalid.Value("overlap_seconds", RuleOverlapRange,
				fmt.Sprintf("overlap_seconds must be between 0 and %d.", int64(MaxRollOverlap/time.Second)))
		}
		keep = time.Duration(*overlapSeconds) * time.Second
	}
	// The successor is of the old key's environment; the store asks
	// MayRoll again, under the key's lock, before it writes.
	old, err := r.store.GetAPIKey(ctx, merchantID, id)
	if err != nil {
		return IssuedKey{}, err
	}
	if err := MayRoll(old, r.store.Now()); err != nil {
		return IssuedKey{}, err
	}
	key, err := NewAPIKey(old.Environment)
	if err != nil {
		return IssuedKey{}, err
	}
	successor, err := r.store.RollAPIKey(ctx, merchantID, id, key, r.store.Now().Add(keep), MayRoll)
	if err != nil {
		return IssuedKey{}, err
	}
	return IssuedKey{Key: key, APIKey: successor}, nil
}

// MayRoll is the rule of a roll (a store.RollRule): only a key that is
// active at now, neither revoked nor rolled already, gets a successor; any
// other is store.ErrAPIKeyInactive.
func MayRoll(k store.APIKey, now time.Time) error {
	if KeyStatus(k, now) != KeyActive {
		return fmt.Errorf("roll api key %s: %w", k.ID, store.ErrAPIKeyInactive)
	}
	return nil
}

// checkKey applies the merchant-id rule and parses a key id.
func checkKey(merchantID, keyID string) (uuid.UUID, error) {
	if err := CheckID("merchant_id", merchantID); err != nil {
		return uuid.Nil, err
	}
	id, bad := invalid.UUID("key_id", RuleKeyIDMalformed, keyID)
	if bad != nil {
		return uuid.Nil, bad
	}
	return id, nil
}
