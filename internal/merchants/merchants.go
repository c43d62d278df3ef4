// Package merchants holds the rules about webhookd's tenants and the API
// keys they authenticate with: what a merchant id may be, which scopes a key
// may hold, and how a key is made and issued. It knows no HTTP: a broken
// rule is an *invalid.Error, which each surface renders in its own format.
package merchants

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// RuleIDMalformed is the rule a merchant id that CheckID refuses breaks.
const RuleIDMalformed = "merchant_id_malformed"

// CheckID refuses a merchant id that is empty, longer than 255 bytes, not
// UTF-8 or holding a NUL (a Postgres text column can hold neither). param
// names the field that held it. It is the one merchant-id rule: the
// publisher, the keys and the merchant settings all apply it.
func CheckID(param, id string) error {
	if id == "" {
		return invalid.Missing(param)
	}
	if len(id) > 255 || !utf8.ValidString(id) || strings.ContainsRune(id, 0) {
		return invalid.Value(param, RuleIDMalformed, "merchant_id must be 1 to 255 bytes of UTF-8.")
	}
	return nil
}

// The scopes an API key may hold.
const (
	ScopeRead  = "webhooks:read"
	ScopeWrite = "webhooks:write"
)

// Scopes is the scope catalogue, a fresh slice on each call so that no
// caller can change it for the others.
func Scopes() []string { return []string{ScopeRead, ScopeWrite} }

// checkScopes checks a requested scope list against the catalogue.
func checkScopes(scopes []string) error {
	if len(scopes) == 0 {
		return invalid.Missing("scopes")
	}
	known := Scopes()
	for _, sc := range scopes {
		if !slices.Contains(known, sc) {
			return invalid.Value("scopes", "scope_unknown", fmt.Sprintf("Unknown scope %q; known scopes: %v.", sc, known))
		}
	}
	return nil
}

// KeyPrefix is the prefix of an environment's API keys (spec 5.3), so that
// a key shows which environment it opens.
func KeyPrefix(environment string) string {
	if environment == "production" {
		return "prod."
	}
	return "sandbox."
}

// NewAPIKey makes a key string: the environment's prefix and 32 random bytes.
func NewAPIKey(environment string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate api key: %w", err)
	}
	return KeyPrefix(environment) + base64.RawURLEncoding.EncodeToString(b), nil
}

// KeyStore is what a KeyIssuer needs of the database.
type KeyStore interface {
	// CreateAPIKey stores the hash of key for the merchant, creating the
	// merchant pinned to defaultVersion if it is new.
	CreateAPIKey(ctx context.Context, merchantID, defaultVersion, environment, key string, scopes []string) (store.APIKey, error)
}

// KeyIssuer issues the API keys of one environment.
type KeyIssuer struct {
	store          KeyStore
	environment    string
	defaultVersion string
}

// NewKeyIssuer is a KeyIssuer storing keys of environment in st; a merchant
// that a key creates is pinned to defaultVersion.
func NewKeyIssuer(st KeyStore, environment, defaultVersion string) *KeyIssuer {
	return &KeyIssuer{store: st, environment: environment, defaultVersion: defaultVersion}
}

// IssuedKey is a key just made: the key itself, shown this once, and what
// webhookd keeps of it.
type IssuedKey struct {
	// Key is the secret; only its hash and its prefix are stored.
	Key string
	store.APIKey
}

// Issue checks the scopes and the merchant id, makes a key, stores its hash
// and returns the key: the only time it is ever seen.
func (i *KeyIssuer) Issue(ctx context.Context, merchantID string, scopes []string) (string, error) {
	issued, err := i.Create(ctx, merchantID, scopes)
	return issued.Key, err
}

// Create is Issue returning the stored key (its id, prefix, scopes…) with
// the key.
func (i *KeyIssuer) Create(ctx context.Context, merchantID string, scopes []string) (IssuedKey, error) {
	if err := checkScopes(scopes); err != nil {
		return IssuedKey{}, err
	}
	if err := CheckID("merchant_id", merchantID); err != nil {
		return IssuedKey{}, err
	}
	key, err := NewAPIKey(i.environment)
	if err != nil {
		return IssuedKey{}, err
	}
	// The store's error already names the merchant.
	stored, err := i.store.CreateAPIKey(ctx, merchantID, i.defaultVersion, i.environment, key, scopes)
	if err != nil {
		return IssuedKey{}, err
	}
	return IssuedKey{Key: key, APIKey: stored}, nil
}
