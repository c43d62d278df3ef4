package admin

import (
	"context"
	"encoding/json"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// encryptionNames are the names of the encryption object's fields on one
// surface: snake_case on /v1, camelCase on the legacy routes.
type encryptionNames struct{ publicKey string }

// encryptionNamesOf are the names of the request's surface.
func encryptionNamesOf(ctx context.Context) encryptionNames {
	if isLegacy(ctx) {
		return encryptionNames{publicKey: "publicKey"}
	}
	return encryptionNames{publicKey: "public_key"}
}

// encryptionInput reads the encryption field of a create or an update as
// sent (f): absent (set false), null (set, nil: remove it) or an object
// whose one key is the surface's public_key, an object: the JWK, which
// the registry checks. Nothing of the value is quoted.
func encryptionInput(ctx context.Context, f rawField) (set bool, jwk []byte, err error) {
	if !f.Set || string(f.Raw) == "null" {
		return f.Set, nil, nil
	}
	name := encryptionNamesOf(ctx).publicKey
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(f.Raw, &fields); err != nil || fields == nil {
		return true, nil, invalid.Value("encryption", "encryption_not_object",
			`encryption must be an object such as {"`+name+`": {"kty": "RSA", ...}}, or null to remove it.`)
	}
	for k := range fields {
		if k != name {
			return true, nil, invalid.Value("encryption", "encryption_field_unknown",
				"encryption has no field "+invalid.Quote(k)+"; its one field is "+name+".")
		}
	}
	raw, ok := fields[name]
	if !ok || string(raw) == "null" {
		return true, nil, invalid.Missing("encryption." + name)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return true, nil, invalid.Value("encryption."+name, "encryption_key_not_object",
			"encryption."+name+" must be a JWK: a JSON object such as {\"kty\": \"EC\", \"crv\": \"P-256\", \"x\": ..., \"y\": ...}.")
	}
	return true, raw, nil
}

// signing is what a read shows of how a subscription's deliveries are
// signed and encrypted; none of it is secret. Each surface puts it in its
// resource under its own names.
type signing struct {
	// scheme is "hmac_sha256" or "ed25519".
	scheme string
	// publicKey is the current Ed25519 public key and publicKeys every one
	// that signs now (two during a rotation's overlap), newest first; nil
	// for hmac_sha256.
	publicKey  *string
	publicKeys []string
	// encryption is the encryption key's description, in the surface's
	// names; nil for none.
	encryption encryptionJSON
}

// encryptionJSON is what a read shows of an encryption key.
type encryptionJSON map[string]any

// signingView is how sub's deliveries are signed and encrypted, in the
// names of the request's surface. A stored encryption key that cannot be
// read again is logged and shown as null rather than failing the read.
func (c subscriptionChanges) signingView(ctx context.Context, sub store.Subscription) signing {
	v := signing{scheme: subscriptions.SignatureScheme(sub), publicKeys: c.registry.SigningPublicKeys(sub)}
	if len(v.publicKeys) > 0 {
		v.publicKey = &v.publicKeys[0]
	}
	enc, err := subscriptions.EncryptionOf(sub)
	if err != nil {
		c.logger.ErrorContext(ctx, "read subscription encryption key", "subscription_id", sub.ID, "error", err)
		return v
	}
	if enc != nil {
		v.encryption = encryptionJSON{encryptionNamesOf(ctx).publicKey: json.RawMessage(enc.PublicKey),
			"kid": enc.KeyID, "thumbprint": enc.Thumbprint, "alg": enc.Algorithm, "enc": enc.ContentEncryption}
	}
	return v
}
