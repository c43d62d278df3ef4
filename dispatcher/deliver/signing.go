package deliver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// Signing is what an attempt does to its body beyond sending it: encrypt
// it to the subscription's public key when it has one, then sign the body
// as sent with the keys active now, of either scheme (HMAC "v1", Ed25519
// "v1a"). The zero Signing sends the body in clear, unsigned: only tests
// send so.
type Signing struct {
	// Keys are the active signing keys, the current one first.
	Keys []signer.SigningKey
	// Encryption, when not nil, is the merchant's public key the body is
	// encrypted to (a compact JWE, content-type application/jose).
	Encryption *signer.EncryptionKey
}

// payload is the body as sent and its content type: the envelope as JSON,
// or its JWE.
func (s Signing) payload(body []byte) ([]byte, string, error) {
	if s.Encryption == nil {
		return body, "application/json", nil
	}
	jwe, err := s.Encryption.Encrypt(body)
	if err != nil {
		return nil, "", err
	}
	return jwe, signer.ContentTypeJWE, nil
}

// Signing is how the leased delivery's body is signed and encrypted at
// now: its subscription's active keys (Keys) and its encryption key,
// parsed once per key and kept.
func (c *SecretCache) Signing(ctx context.Context, l store.LeasedDelivery, now time.Time) (Signing, error) {
	keys, err := c.Keys(ctx, l.SubscriptionID, l.SubscriptionVersion, now)
	if err != nil {
		return Signing{}, err
	}
	enc, err := c.encryption.key(l.EncryptionKey)
	if err != nil {
		return Signing{}, fmt.Errorf("encryption key of subscription %s: %w", l.SubscriptionID, err)
	}
	return Signing{Keys: keys, Encryption: enc}, nil
}

// encryptionKeys keeps parsed encryption keys by their JWK, so that an
// attempt costs no parse (an RSA key's is not free). A JWK names its key
// whole: a changed key is a new entry, and entries of keys no longer used
// are dropped past a bound.
type encryptionKeys struct {
	mu   sync.Mutex
	keys map[string]*signer.EncryptionKey
}

// maxEncryptionKeys bounds encryptionKeys; past it, it starts again empty.
const maxEncryptionKeys = 10_000

// key is jwk parsed; nil for none.
func (e *encryptionKeys) key(jwk []byte) (*signer.EncryptionKey, error) {
	if jwk == nil {
		return nil, nil
	}
	e.mu.Lock()
	k, ok := e.keys[string(jwk)]
	e.mu.Unlock()
	if ok {
		return k, nil
	}
	k, err := signer.ParseEncryptionKey(jwk)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.keys == nil || len(e.keys) >= maxEncryptionKeys {
		e.keys = make(map[string]*signer.EncryptionKey)
	}
	e.keys[string(jwk)] = k
	e.mu.Unlock()
	return k, nil
}
