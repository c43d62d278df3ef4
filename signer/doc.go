// Package signer signs webhook deliveries as described by the Standard
// Webhooks specification (https://www.standardwebhooks.com), makes new
// signing secrets, decides which secrets are active while a secret is being
// rotated, and seals secrets at rest. It signs by either of the
// specification's schemes: HMAC-SHA256 ("v1") with a shared "whsec_"
// secret, the default, or Ed25519 ("v1a") with a "whsk_" private key whose
// "whpk_" public key the merchant verifies with.
//
// A delivery carries three headers:
//
//	webhook-id:        the event id, stable across retries (receivers deduplicate on it)
//	webhook-timestamp: Unix seconds of this attempt
//	webhook-signature: "v1,<base64 HMAC-SHA256>" or "v1a,<base64 Ed25519>" values, space-separated
//
// The signed content is "{webhook-id}.{webhook-timestamp}.{raw body}". The
// HMAC key is the base64-decoded part of a "whsec_…" secret; the Ed25519
// key is the base64-decoded part of a "whsk_…" key (64 bytes, seed then
// public key, as the Svix server writes it; a 32-byte seed, as the Standard
// Webhooks Go library reads it, is read too).
// During a rotation the sender signs with both active secrets, so a
// receiver holding either the old or the new secret (or public key) accepts
// the delivery.
//
// A subscription's stored secrets are strings of either kind, and a secret
// knows its scheme by its prefix: [NewSigningSecret] makes one of a
// [Scheme], [Rotate] accepts either, [SigningKeys] parses the active ones
// into [SigningKey] values and [SignWith] or [SetHeadersWith] signs with
// them, one value per key in its own scheme. [NewSigningKeyPair] and
// [PublicKeyOf] give the public key a merchant is shown. [Sign],
// [SetHeaders] and [Keys] are the HMAC-only forms, unchanged.
//
// Those rules are written once, in package receiver, which verifies
// deliveries; signer imports them and signs by them ([Sign] is
// [receiver.Signature], [ParseSecret] is [receiver.ParseSecret], the Ed25519
// formats are [receiver.ParsePrivateKey] and [receiver.ParsePublicKey]; [Key],
// [SecretPrefix], [ErrInvalidSecret] and the header names are receiver's),
// so that what webhookd signs is what receivers check.
//
// To verify a delivery, use [receiver.Verifier]: signer no longer has a
// verifier. Removed, with where each went: Verifier and NewVerifier
// ([receiver.NewVerifier] with [receiver.VerifierConfig]; Verify reads the
// clock of the config instead of a now argument), ParseTimestamp
// ([receiver.ParseTimestamp]), DefaultTolerance ([receiver.DefaultTolerance]),
// HeaderValue (done inside [receiver.Verifier.Verify]), and the errors
// ErrMissingHeader, ErrInvalidTimestamp and ErrNoMatchingSignature
// (receiver's of the same names) and ErrTimestampOutOfRange
// ([receiver.ErrTimestampTooOld] or [receiver.ErrTimestampTooNew]).
//
// A subscription with encryption gets its deliveries' bodies encrypted to
// the merchant's public JWK: [ParseEncryptionKey] checks the key once (an
// RSA key for RSA-OAEP-256 or an EC key for ECDH-ES+A256KW, public only,
// refused with [ErrInvalidEncryptionKey] otherwise) and
// [EncryptionKey.Encrypt] turns each envelope into a compact JWE (A256GCM)
// sent with content-type [ContentTypeJWE]. The signature is then computed
// over that JWE, the body as sent, like any other body. The rules of what
// is made are package receiver/jwe's, which merchants decrypt with.
//
// Apart from reading crypto/rand (new secrets and key pairs, sealing
// nonces, content keys) the package does no I/O and reads no clock: every
// decision about time is made against the instant the caller passes in.
package signer
