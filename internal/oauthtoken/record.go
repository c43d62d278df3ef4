package oauthtoken

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/webhookd/webhookd/signer"
)

// record is a token as kept in Redis, sealed.
type record struct {
	// Key is the Redis key the record was written under. A sealed record
	// copied to another subscription's key does not open there, so that
	// whoever can write to Redis cannot make webhookd send one endpoint's
	// token to another.
	Key string `json:"key"`
	// AccessToken is the bearer token.
	AccessToken string `json:"access_token"`
	// RefreshAt is when the token is due for replacing, a margin before
	// Expiry.
	RefreshAt time.Time `json:"refresh_at"`
	// Expiry is when the token endpoint said it expires.
	Expiry time.Time `json:"expiry"`
}

// seal is the record sealed for Redis.
func (r record) seal(s *signer.Sealer) ([]byte, error) {
	plain, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode token record: %w", err)
	}
	return s.Seal(string(plain))
}

// openRecord opens what seal made and checks it belongs under key.
func openRecord(s *signer.Sealer, sealed []byte, key string) (record, error) {
	plain, err := s.Open(sealed)
	if err != nil {
		return record{}, fmt.Errorf("open token record: %w", err)
	}
	var r record
	if err := json.Unmarshal([]byte(plain), &r); err != nil {
		return record{}, errors.New("open token record: not a token record")
	}
	if r.Key != key {
		return record{}, errors.New("open token record: sealed for another key")
	}
	return r, nil
}

// tokenID names a token in Redis without being one: Invalidate compares it
// to drop only the token that was refused. A SHA-256 of a token the
// authorization server drew at random reveals nothing of it.
func tokenID(accessToken string) string {
	sum := sha256.Sum256([]byte(accessToken))
	return hex.EncodeToString(sum[:16])
}
