package oauthtoken

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"

	"golang.org/x/sync/singleflight"

	"github.com/webhookd/webhookd/signer"
)

// fingerprintInfo separates the key of credentials' fingerprints from the
// master key's other uses.
const fingerprintInfo = "webhookd oauth token cache key v1"

// Tokens is a worker process's access to the shared tokens. It is safe for
// concurrent use; one per process.
type Tokens struct {
	cfg      Config
	sealer   *signer.Sealer
	hashKey  []byte
	endpoint endpoint
	// flight makes one Redis round of waiting per subscription in this
	// process, however many of its goroutines want the token.
	flight singleflight.Group
}

// New builds a process's Tokens.
func New(cfg Config) (*Tokens, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	sealer, err := signer.NewSealer(cfg.MasterKey)
	if err != nil {
		return nil, err
	}
	hashKey, err := hkdf.Key(sha256.New, cfg.MasterKey, nil, fingerprintInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("oauthtoken: derive fingerprint key: %w", err)
	}
	return &Tokens{cfg: cfg, sealer: sealer, hashKey: hashKey, endpoint: endpoint{
		http: cfg.HTTP, assertionLifetime: cfg.AssertionLifetime, unknownLifetime: cfg.UnknownLifetime,
	}}, nil
}

// Source is the token of one subscription with one set of credentials.
// It is cheap: make one per attempt from the subscription as read.
func (t *Tokens) Source(subscriptionID string, c Credentials) *Source {
	// The hash tag keeps a subscription's keys in one Cluster slot.
	prefix := "webhookd:oauth:{" + subscriptionID + "}:" + c.fingerprint(t.hashKey)
	return &Source{tokens: t, creds: c, tokenKey: prefix + ":token", lockKey: prefix + ":lock", failureKey: prefix + ":failure"}
}
