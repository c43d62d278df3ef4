package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// signatureVersion tags an HMAC-SHA256 signature. Other versions (such as
// "v1a", asymmetric) may appear in a header and are skipped.
const signatureVersion = "v1"

// encodedDigestLen is the length of a base64-encoded SHA-256 digest.
const encodedDigestLen = (sha256.Size + 2) / 3 * 4

// Signature returns the webhook-signature value that signs a delivery
// with keys: one "v1,<base64 HMAC-SHA256>" per key, space-separated, in
// the order given; "" when no key is given. The content signed is
// "{id}.{timestamp}.{body}", with timestamp the header's text (see
// [FormatTimestamp]) and body the exact bytes sent.
//
// It is the sender's half of the rule [Verifier] checks: package signer
// signs every delivery with it, and an endpoint's tests can build signed
// requests with it.
func Signature(id, timestamp string, body []byte, keys ...Key) string {
	if len(keys) == 0 {
		return ""
	}
	c := newSignedContent(id, timestamp, body)
	var out strings.Builder
	out.Grow(len(keys)*(len(signatureVersion)+1+encodedDigestLen) + len(keys) - 1)
	var enc [encodedDigestLen]byte
	for i, k := range keys {
		c.digest(k, &enc)
		if i > 0 {
			out.WriteByte(' ')
		}
		out.WriteString(signatureVersion)
		out.WriteByte(',')
		out.Write(enc[:])
	}
	return out.String()
}

// matchSignature reports whether some "v1," value of signature, a
// webhook-signature header, is the signature of the content under one of
// keys. Values of other versions and malformed values are skipped, as the
// specification asks.
func matchSignature(id, timestamp, signature string, body []byte, keys []Key) bool {
	c := newSignedContent(id, timestamp, body)
	var enc [encodedDigestLen]byte
	for _, k := range keys {
		c.digest(k, &enc)
		// Compare against every value rather than stopping at the first
		// malformed one: senders may add versions this package does not know.
		for rest := signature; rest != ""; {
			var field string
			field, rest, _ = strings.Cut(rest, " ")
			version, sig, ok := strings.Cut(field, ",")
			if !ok || version != signatureVersion {
				continue
			}
			// hmac.Equal runs in constant time for equal lengths, so timing
			// reveals nothing about how much of a forged value was right.
			if hmac.Equal([]byte(sig), enc[:]) {
				return true
			}
		}
	}
	return false
}

// signedContent is what a delivery's signatures sign. It avoids building
// the content as one string (the body may be large): the short
// "{id}.{timestamp}." prefix, built once for every key, and the body are
// written to the MAC one after the other, which gives the same digest.
type signedContent struct {
	// scratch holds the prefix, with room after it for one digest.
	scratch []byte
	body    []byte
}

func newSignedContent(id, timestamp string, body []byte) signedContent {
	scratch := make([]byte, 0, len(id)+len(timestamp)+2+sha256.Size)
	scratch = append(scratch, id...)
	scratch = append(scratch, '.')
	scratch = append(scratch, timestamp...)
	scratch = append(scratch, '.')
	return signedContent{scratch: scratch, body: body}
}

// digest writes to enc the base64 HMAC-SHA256 of the content under key.
func (c signedContent) digest(key Key, enc *[encodedDigestLen]byte) {
	mac := hmac.New(sha256.New, key)
	mac.Write(c.scratch)
	mac.Write(c.body)
	base64.StdEncoding.Encode(enc[:], mac.Sum(c.scratch[len(c.scratch):]))
}
