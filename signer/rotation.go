package signer

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// RotationOverlap is how long the previous secret stays valid after a
// rotation: long enough for a merchant to deploy the new secret on every
// receiver, while deliveries carry signatures for both.
const RotationOverlap = 24 * time.Hour

// MaxActiveSecrets bounds the secrets active at once, and so the number of
// signatures in a webhook-signature header.
const MaxActiveSecrets = 2

// Secret is a signing secret of one subscription, as a store persists it.
type Secret struct {
	// ID identifies the secret in the store; zero for one not stored yet.
	ID int64
	// Value is the "whsec_…" secret, or the "whsk_…" private key of an
	// ed25519 subscription.
	Value string
	// CreatedAt is when the secret became current.
	CreatedAt time.Time
	// ExpiresAt is the first instant at which the secret is no longer valid;
	// nil means it does not expire.
	ExpiresAt *time.Time
}

// ActiveAt reports whether s signs deliveries at now: created at or before
// now and not yet expired.
func (s Secret) ActiveAt(now time.Time) bool {
	return !s.CreatedAt.After(now) && (s.ExpiresAt == nil || now.Before(*s.ExpiresAt))
}

// Active returns the secrets active at now, newest first (the current secret
// first, as [Sign] wants its keys), at most [MaxActiveSecrets] of them. If the
// store somehow holds more active secrets, the newest win: an older one is
// what a completed rotation meant to retire. The input is not modified.
func Active(secrets []Secret, now time.Time) []Secret {
	active := activeNewestFirst(secrets, now)
	if len(active) > MaxActiveSecrets {
		active = active[:MaxActiveSecrets:MaxActiveSecrets]
	}
	return active
}

// Expiry is one update a rotation asks the store to make: set the ExpiresAt
// of secret ID.
type Expiry struct {
	ID        int64
	ExpiresAt time.Time
}

// Rotation is the outcome of [Rotate]: a store persists it in one
// transaction, inserting New and applying every Expiry.
type Rotation struct {
	// New is the new current secret: ID zero, CreatedAt now, no expiry.
	New Secret
	// Expire lists the secrets whose expiry changes, newest first.
	Expire []Expiry
}

// Rotate makes newValue the current secret at now. The secret that was
// current stays valid for [RotationOverlap] (or until its own earlier expiry),
// and every older secret still active expires at once, so that at most
// [MaxActiveSecrets] are ever active: a second rotation inside the overlap
// drops the oldest secret immediately. Secrets already expired, or created
// after now, are left alone.
//
// newValue must be a valid signing secret of either scheme (see
// [ParseSigningKey]), typically from [NewSigningSecret]; the input slice is
// not modified. Rotating to a secret of the other scheme is how a
// subscription changes scheme without a gap: during the overlap deliveries
// carry a "v1" and a "v1a" signature, and a receiver holding the old secret
// or the new public key accepts them.
func Rotate(secrets []Secret, now time.Time, newValue string) (Rotation, error) {
	if _, err := ParseSigningKey(newValue); err != nil {
		return Rotation{}, fmt.Errorf("rotate: %w", err)
	}
	active := activeNewestFirst(secrets, now)
	r := Rotation{New: Secret{Value: newValue, CreatedAt: now}}
	for i, s := range active {
		until := now // older than the current one: retire now
		if i == 0 {
			until = now.Add(RotationOverlap)
			if s.ExpiresAt != nil && s.ExpiresAt.Before(until) {
				// Never extend a secret's life: it may have been shortened
				// on purpose, after a leak for instance.
				until = *s.ExpiresAt
			}
		}
		r.Expire = append(r.Expire, Expiry{ID: s.ID, ExpiresAt: until})
	}
	return r, nil
}

// activeNewestFirst returns all secrets active at now, newest first; ties on
// CreatedAt fall back to the higher ID so that the order is deterministic.
func activeNewestFirst(secrets []Secret, now time.Time) []Secret {
	var active []Secret
	for _, s := range secrets {
		if s.ActiveAt(now) {
			active = append(active, s)
		}
	}
	slices.SortStableFunc(active, func(a, b Secret) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return active
}

// Apply returns secrets as they stand once r is persisted: a copy with every
// Expiry applied and r.New appended under newID. It is what a store's
// transaction amounts to, and lets callers and tests chain rotations without
// a database.
func (r Rotation) Apply(secrets []Secret, newID int64) []Secret {
	out := make([]Secret, 0, len(secrets)+1)
	for _, s := range secrets {
		for _, e := range r.Expire {
			if e.ID == s.ID {
				until := e.ExpiresAt
				s.ExpiresAt = &until
			}
		}
		out = append(out, s)
	}
	n := r.New
	n.ID = newID
	return append(out, n)
}
