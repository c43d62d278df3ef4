package signer

import (
	"net/http"
	"strings"
	"time"

	"github.com/webhookd/webhookd/receiver"
)

// Names of the Standard Webhooks headers, as [receiver] defines them.
const (
	HeaderID        = receiver.HeaderID
	HeaderTimestamp = receiver.HeaderTimestamp
	HeaderSignature = receiver.HeaderSignature
)

// Sign returns the value of the webhook-signature header for a delivery: one
// "v1,<base64 HMAC-SHA256>" per key, space-separated, in the order given.
// Callers pass the current secret first; during a rotation they also pass the
// previous one, so receivers that have not switched yet keep verifying.
//
// The content signed is "{id}.{ts in Unix seconds}.{body}", by
// [receiver.Signature], the rule [receiver.Verifier] checks. body must be
// the exact bytes sent: re-serialising JSON would break every signature.
// Sign returns "" when no key is given.
func Sign(id string, ts time.Time, body []byte, keys ...Key) string {
	return receiver.Signature(id, receiver.FormatTimestamp(ts), body, keys...)
}

// SetHeaders sets the three Standard Webhooks headers of a delivery attempt
// on h: ts is the time of this attempt (a redelivery gets a fresh timestamp
// and fresh signatures, but keeps its id).
func SetHeaders(h http.Header, id string, ts time.Time, body []byte, keys ...Key) {
	timestamp := receiver.FormatTimestamp(ts)
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, timestamp)
	h.Set(HeaderSignature, receiver.Signature(id, timestamp, body, keys...))
}

// SignWith is [Sign] for keys of either scheme: one value per key, in the
// order given, "v1,<base64 HMAC-SHA256>" for an HMAC key and
// "v1a,<base64 Ed25519 signature>" for an Ed25519 one, space-separated.
// With HMAC keys only, its result is byte for byte Sign's. During a
// rotation both active keys sign, so a receiver holding either the old or
// the new secret or public key verifies.
func SignWith(id string, ts time.Time, body []byte, keys ...SigningKey) string {
	return signWith(id, receiver.FormatTimestamp(ts), body, keys)
}

// SetHeadersWith is [SetHeaders] for keys of either scheme, signing as
// [SignWith] does.
func SetHeadersWith(h http.Header, id string, ts time.Time, body []byte, keys ...SigningKey) {
	timestamp := receiver.FormatTimestamp(ts)
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, timestamp)
	h.Set(HeaderSignature, signWith(id, timestamp, body, keys))
}

func signWith(id, timestamp string, body []byte, keys []SigningKey) string {
	values := make([]string, len(keys))
	for i, k := range keys {
		values[i] = k.signature(id, timestamp, body)
	}
	return strings.Join(values, " ")
}
