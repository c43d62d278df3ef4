package receiver

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"
)

// ed25519Version tags an Ed25519 signature, the Standard Webhooks
// asymmetric scheme.
const ed25519Version = "v1a"

// encodedEd25519Len is the length of a base64-encoded Ed25519 signature.
const encodedEd25519Len = (ed25519.SignatureSize + 2) / 3 * 4

// Ed25519Signature returns the webhook-signature value that signs a
// delivery with Ed25519 keys: one "v1a,<base64 signature>" per key,
// space-separated, in the order given; "" when no key is given. The content
// signed is the one of [Signature], "{id}.{timestamp}.{body}".
//
// It is the sender's half of the "v1a" rule [Verifier] checks with
// [VerifierConfig.PublicKeys]: package signer signs with it, and an
// endpoint's tests can build signed requests with it. Ed25519 signatures
// are deterministic, so one key and one content always give one value.
func Ed25519Signature(id, timestamp string, body []byte, keys ...PrivateKey) string {
	if len(keys) == 0 {
		return ""
	}
	msg := signedMessage(id, timestamp, body)
	var out strings.Builder
	out.Grow(headerLen(len(keys), ed25519Version, encodedEd25519Len))
	var enc [encodedEd25519Len]byte
	for _, k := range keys {
		base64.StdEncoding.Encode(enc[:], ed25519.Sign(ed25519.PrivateKey(k), msg))
		writeValue(&out, ed25519Version, enc[:])
	}
	return out.String()
}

// matchEd25519Signature reports whether some "v1a," value of signature, a
// webhook-signature header, is a valid Ed25519 signature of the content
// under one of keys. Values of other versions and malformed values are
// skipped, as for [matchSignature].
func matchEd25519Signature(id, timestamp, signature string, body []byte, keys []PublicKey) bool {
	if len(keys) == 0 {
		return false
	}
	// Ed25519 hashes the message twice, so it cannot be streamed like the
	// HMAC: the content is built once, and only if a "v1a" value is present.
	var msg []byte
	// Decode writes up to DecodedLen of its input, 66 bytes for 88
	// characters: a value without the two padding characters a 64-byte
	// signature ends in decodes to 66, and a 64-byte buffer made the
	// decoder panic (a sender's header crashing the receiver's handler).
	var buf [encodedEd25519Len / 4 * 3]byte
	sig := buf[:ed25519.SignatureSize]
	for enc := range values(signature, ed25519Version) {
		if len(enc) != encodedEd25519Len {
			continue
		}
		// Strict, so that like a "v1" value (compared as text) a signature
		// has one spelling.
		if n, err := base64.StdEncoding.Strict().Decode(buf[:], []byte(enc)); err != nil || n != len(sig) {
			continue
		}
		if msg == nil {
			msg = signedMessage(id, timestamp, body)
		}
		for _, k := range keys {
			// A signature check needs no constant-time care: it involves
			// no secret, only the public key and the signature sent.
			if ed25519.Verify(ed25519.PublicKey(k), msg, sig) {
				return true
			}
		}
	}
	return false
}

// signedMessage returns the content a delivery's signatures sign,
// "{id}.{timestamp}.{body}", as one slice.
func signedMessage(id, timestamp string, body []byte) []byte {
	msg := appendSignedPrefix(make([]byte, 0, len(id)+len(timestamp)+2+len(body)), id, timestamp)
	return append(msg, body...)
}
