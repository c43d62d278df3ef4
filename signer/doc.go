// Package signer signs and verifies webhook deliveries as described by the
// Standard Webhooks specification (https://www.standardwebhooks.com), and
// decides which signing secrets are active while a secret is being rotated.
//
// A delivery carries three headers:
//
//	webhook-id:        the event id, stable across retries (receivers deduplicate on it)
//	webhook-timestamp: Unix seconds of this attempt
//	webhook-signature: "v1,<base64 HMAC-SHA256>" values, space-separated
//
// The signed content is "{webhook-id}.{webhook-timestamp}.{raw body}" and the
// HMAC key is the base64-decoded part of a "whsec_…" secret. During a rotation
// the sender signs with both active secrets, so a receiver holding either the
// old or the new secret accepts the delivery.
//
// Apart from reading crypto/rand (new secrets, sealing nonces) the package
// does no I/O and reads no clock: every decision about time is made against
// the instant the caller passes in. Receivers can import it directly: see [Verifier].
package signer
