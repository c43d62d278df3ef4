package signer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Names of the Standard Webhooks headers. They are written in lower case as
// in the specification; [http.Header] canonicalises them on the wire.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// signatureVersion tags an HMAC-SHA256 signature. Other versions (such as
// "v1a", asymmetric) may appear in a header and are skipped by receivers.
const signatureVersion = "v1"

// encodedDigestLen is the length of a base64-encoded SHA-256 digest.
var encodedDigestLen = base64.StdEncoding.EncodedLen(sha256.Size)

// Sign returns the value of the webhook-signature header for a delivery: one
// "v1,<base64 HMAC-SHA256>" per key, space-separated, in the order given.
// Callers pass the current secret first; during a rotation they also pass the
// previous one, so receivers that have not switched yet keep verifying.
//
// The content signed is "{id}.{ts in Unix seconds}.{body}". body must be the
// exact bytes sent: re-serialising JSON would break every signature. Sign
// returns "" when no key is given.
//
// Sign runs once per delivery attempt, so it avoids building the content as
// one string (the body may be large): the short "{id}.{ts}." prefix and the
// body are written to the MAC one after the other, which gives the same
// digest, and the result is assembled in a single pre-sized builder.
func Sign(id string, ts time.Time, body []byte, keys ...Key) string {
	if len(keys) == 0 {
		return ""
	}
	// One scratch buffer holds the prefix and, after it, each key's digest.
	scratch := make([]byte, 0, len(id)+len(".-9223372036854775808.")+sha256.Size)
	scratch = append(scratch, id...)
	scratch = append(scratch, '.')
	scratch = strconv.AppendInt(scratch, ts.Unix(), 10)
	scratch = append(scratch, '.')
	prefix := scratch[:len(scratch):len(scratch)]

	var out strings.Builder
	out.Grow(len(keys)*(len(signatureVersion)+1+encodedDigestLen) + len(keys) - 1)
	var enc [44]byte // base64 of a SHA-256 digest; checked by encodedDigestLen in tests
	for i, k := range keys {
		mac := hmac.New(sha256.New, k)
		mac.Write(prefix)
		mac.Write(body)
		sum := mac.Sum(scratch[len(prefix):len(prefix)])
		base64.StdEncoding.Encode(enc[:], sum)
		if i > 0 {
			out.WriteByte(' ')
		}
		out.WriteString(signatureVersion)
		out.WriteByte(',')
		out.Write(enc[:])
	}
	return out.String()
}

// SetHeaders sets the three Standard Webhooks headers of a delivery attempt
// on h: ts is the time of this attempt (a redelivery gets a fresh timestamp
// and fresh signatures, but keeps its id).
func SetHeaders(h http.Header, id string, ts time.Time, body []byte, keys ...Key) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, Sign(id, ts, body, keys...))
}
