package signer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock, in either direction. It bounds how long a captured
// request can be replayed while allowing for modest clock skew.
const DefaultTolerance = 5 * time.Minute

// maxTimestampDigits keeps the timestamp well inside int64 (and inside the
// range where [time.Time] arithmetic is exact): 15 digits reach year 31 million.
const maxTimestampDigits = 15

// Errors returned by [Verifier.Verify], wrapped with detail; test them with
// [errors.Is]. A receiver should answer every one of them with a 4xx status
// and must not process the body.
var (
	// ErrMissingHeader: webhook-id, webhook-timestamp or webhook-signature is absent or empty.
	ErrMissingHeader = errors.New("signer: missing header")
	// ErrInvalidTimestamp: webhook-timestamp is not Unix seconds in decimal digits.
	ErrInvalidTimestamp = errors.New("signer: invalid timestamp")
	// ErrTimestampOutOfRange: the timestamp is further from now than the tolerance.
	ErrTimestampOutOfRange = errors.New("signer: timestamp outside tolerance")
	// ErrNoMatchingSignature: no "v1," signature matches any of the keys.
	ErrNoMatchingSignature = errors.New("signer: no matching signature")
)

// Verifier checks webhook deliveries. Its zero Tolerance means
// [DefaultTolerance]. A Verifier is immutable in use and safe for concurrent
// use by many goroutines.
type Verifier struct {
	// Keys are the receiver's signing keys. Keep both the old and the new key
	// here during a rotation; a delivery is accepted if any one matches.
	Keys []Key
	// Tolerance is the accepted distance between the delivery's timestamp and
	// now, in both directions; zero or negative means DefaultTolerance.
	Tolerance time.Duration
}

// NewVerifier returns a Verifier for the given "whsec_…" secrets and the
// default tolerance.
func NewVerifier(secrets ...string) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no secret given", ErrInvalidSecret)
	}
	keys := make([]Key, 0, len(secrets))
	for i, s := range secrets {
		k, err := ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("secret #%d: %w", i+1, err)
		}
		keys = append(keys, k)
	}
	return &Verifier{Keys: keys}, nil
}

// Verify checks the Standard Webhooks headers in h against body, the raw
// request body exactly as received (read it before any JSON decoding). now is
// the receiver's clock, passed in so that tests can pin it; use time.Now().
//
// It returns nil when the timestamp is within the tolerance of now and some
// "v1," value of webhook-signature is the HMAC of the content under one of
// the keys. Values of other versions are ignored, as the specification asks.
func (v *Verifier) Verify(h http.Header, body []byte, now time.Time) error {
	return v.VerifyValues(HeaderValue(h, HeaderID), HeaderValue(h, HeaderTimestamp), HeaderValue(h, HeaderSignature), body, now)
}

// VerifyValues is [Verifier.Verify] for callers that do not hold an
// [http.Header], such as a queue consumer or a framework with its own header type.
func (v *Verifier) VerifyValues(id, timestamp, signature string, body []byte, now time.Time) error {
	if err := v.checkKeys(); err != nil {
		return err
	}
	switch {
	case id == "":
		return fmt.Errorf("%w: %s", ErrMissingHeader, HeaderID)
	case timestamp == "":
		return fmt.Errorf("%w: %s", ErrMissingHeader, HeaderTimestamp)
	case signature == "":
		return fmt.Errorf("%w: %s", ErrMissingHeader, HeaderSignature)
	}
	ts, err := ParseTimestamp(timestamp)
	if err != nil {
		return err
	}
	tol := v.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	// Reject both stale and future timestamps: a future one would extend the
	// replay window of a captured request by however far ahead it is.
	if age := now.Sub(ts); age > tol || age < -tol {
		return fmt.Errorf("%w: timestamp %s is %s from now, tolerance %s",
			ErrTimestampOutOfRange, timestamp, age.Round(time.Second), tol)
	}
	return v.match(id, timestamp, signature, body)
}

// MatchSignature is the signature half of [Verifier.VerifyValues]: nil when
// some "v1," value of signature is the HMAC of the content under one of the
// keys, else [ErrNoMatchingSignature]. It checks neither the headers'
// presence nor the timestamp's age (a caller with its own rules for those,
// such as package receiver, checks them first); timestamp must be the
// header's text, which [ParseTimestamp] accepts only in the canonical form
// the sender signed.
func (v *Verifier) MatchSignature(id, timestamp, signature string, body []byte) error {
	if err := v.checkKeys(); err != nil {
		return err
	}
	return v.match(id, timestamp, signature, body)
}

// match is MatchSignature on keys already checked.
func (v *Verifier) match(id, timestamp, signature string, body []byte) error {
	scratch := make([]byte, 0, len(id)+len(timestamp)+2+sha256.Size)
	scratch = append(scratch, id...)
	scratch = append(scratch, '.')
	scratch = append(scratch, timestamp...)
	scratch = append(scratch, '.')
	prefix := scratch[:len(scratch):len(scratch)]
	var enc [44]byte
	for _, k := range v.Keys {
		mac := hmac.New(sha256.New, k)
		mac.Write(prefix)
		mac.Write(body)
		base64.StdEncoding.Encode(enc[:], mac.Sum(scratch[len(prefix):len(prefix)]))
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
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}

// checkKeys refuses to verify with no key or an empty key: HMAC under an
// empty key is a value anyone can compute, so accepting it would let anyone
// forge deliveries.
func (v *Verifier) checkKeys() error {
	if len(v.Keys) == 0 {
		return fmt.Errorf("%w: verifier has no keys", ErrInvalidSecret)
	}
	for i, k := range v.Keys {
		if len(k) == 0 {
			return fmt.Errorf("%w: key #%d is empty", ErrInvalidSecret, i+1)
		}
	}
	return nil
}

// HeaderValue reads a header by its canonical name and falls back to the
// exact lower-case key, for maps built by hand (http.Header{"webhook-id": …})
// that [http.Header.Get] would miss.
func HeaderValue(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	if vs := h[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// ParseTimestamp reads a webhook-timestamp header. It accepts Unix seconds
// written as plain decimal digits with
// no sign, no leading zero and no spaces. Being this strict means the header
// text is the canonical form the sender signed, so it can be fed to the MAC
// as is; anything looser would be ambiguous ("+1", "01" and "1" are one
// number but three different signed contents).
func ParseTimestamp(s string) (time.Time, error) {
	if len(s) > maxTimestampDigits {
		// Not quoted: the header is attacker-controlled and may be huge.
		return time.Time{}, fmt.Errorf("%w: longer than %d digits", ErrInvalidTimestamp, maxTimestampDigits)
	}
	if len(s) > 1 && s[0] == '0' {
		return time.Time{}, fmt.Errorf("%w: %q is not Unix seconds", ErrInvalidTimestamp, s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, fmt.Errorf("%w: %q is not Unix seconds", ErrInvalidTimestamp, s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil { // unreachable with the checks above; kept as a guard
		return time.Time{}, fmt.Errorf("%w: %w", ErrInvalidTimestamp, err)
	}
	return time.Unix(n, 0), nil
}
