package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"iter"
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
	out.Grow(headerLen(len(keys), signatureVersion, encodedDigestLen))
	var enc [encodedDigestLen]byte
	for _, k := range keys {
		c.digest(k, &enc)
		writeValue(&out, signatureVersion, enc[:])
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
		for sig := range values(signature, signatureVersion) {
			// hmac.Equal runs in constant time for equal lengths, so timing
			// reveals nothing about how much of a forged value was right.
			if hmac.Equal([]byte(sig), enc[:]) {
				return true
			}
		}
	}
	return false
}

// headerLen is the length of a webhook-signature header of n values of
// version, each encLen characters long.
func headerLen(n int, version string, encLen int) int {
	return n*(len(version)+1+encLen) + n - 1
}

// writeValue appends one "version,enc" value to a webhook-signature header,
// after a space unless it is the first.
func writeValue(out *strings.Builder, version string, enc []byte) {
	if out.Len() > 0 {
		out.WriteByte(' ')
	}
	out.WriteString(version)
	out.WriteByte(',')
	out.Write(enc)
}

// values yields the part after the comma of each value of a
// webhook-signature header tagged version. Values of other versions and
// malformed values are skipped rather than ending the walk: senders may add
// versions this package does not know.
func values(signature, version string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for rest := signature; rest != ""; {
			var field string
			field, rest, _ = strings.Cut(rest, " ")
			v, value, ok := strings.Cut(field, ",")
			if ok && v == version && !yield(value) {
				return
			}
		}
	}
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
	scratch := appendSignedPrefix(make([]byte, 0, len(id)+len(timestamp)+2+sha256.Size), id, timestamp)
	return signedContent{scratch: scratch, body: body}
}

// appendSignedPrefix appends to dst the part of the signed content that
// precedes the body, "{id}.{timestamp}.": the one spelling of the content
// for both schemes.
func appendSignedPrefix(dst []byte, id, timestamp string) []byte {
	dst = append(dst, id...)
	dst = append(dst, '.')
	dst = append(dst, timestamp...)
	return append(dst, '.')
}

// digest writes to enc the base64 HMAC-SHA256 of the content under key.
func (c signedContent) digest(key Key, enc *[encodedDigestLen]byte) {
	mac := hmac.New(sha256.New, key)
	mac.Write(c.scratch)
	mac.Write(c.body)
	base64.StdEncoding.Encode(enc[:], mac.Sum(c.scratch[len(c.scratch):]))
}
