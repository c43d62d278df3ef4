package receiver

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Names of the Standard Webhooks headers every delivery carries. They are
// written in lower case as in the specification; [http.Header]
// canonicalises them on the wire.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock, in either direction, when [VerifierConfig.Tolerance] is
// zero. It bounds how long a captured request can be replayed while allowing
// for modest clock skew.
const DefaultTolerance = 5 * time.Minute

// Errors of [Verifier.Verify] (and [ParseTimestamp]). Verify wraps them with
// detail: test with [errors.Is]. A receiver answers every one of them with a
// 4xx status and must not act on the body. [ErrInvalidSecret] and
// [ErrInvalidPublicKey] are the errors of [NewVerifier].
var (
	// ErrMissingHeader: webhook-id, webhook-timestamp or webhook-signature
	// is absent or empty. [*MissingHeaderError] names which.
	ErrMissingHeader = errors.New("receiver: missing header")
	// ErrInvalidTimestamp: webhook-timestamp is not Unix seconds written
	// in decimal digits.
	ErrInvalidTimestamp = errors.New("receiver: invalid timestamp")
	// ErrTimestampTooOld: the timestamp is older than the tolerance allows,
	// such as a captured request replayed later.
	ErrTimestampTooOld = errors.New("receiver: timestamp too old")
	// ErrTimestampTooNew: the timestamp is further in the future than the
	// tolerance allows; usually the receiver's or sender's clock is wrong.
	ErrTimestampTooNew = errors.New("receiver: timestamp too new")
	// ErrNoMatchingSignature: no "v1," value of webhook-signature is the
	// signature of this delivery under any of the secrets, and no "v1a,"
	// value is its signature under any of the public keys.
	ErrNoMatchingSignature = errors.New("receiver: no matching signature")
)

// MissingHeaderError reports which Standard Webhooks header a delivery
// lacks. It matches [ErrMissingHeader] with [errors.Is].
type MissingHeaderError struct {
	// Header is the missing header's name, such as "webhook-signature".
	Header string
}

// Error names the header.
func (e *MissingHeaderError) Error() string { return "receiver: missing header " + e.Header }

// Is makes errors.Is(err, ErrMissingHeader) true.
func (e *MissingHeaderError) Is(target error) bool { return target == ErrMissingHeader }

// TimestampError reports a webhook-timestamp outside the tolerance. It
// matches [ErrTimestampTooOld] or [ErrTimestampTooNew] with [errors.Is].
type TimestampError struct {
	// Timestamp is the delivery's webhook-timestamp.
	Timestamp time.Time
	// Now is the receiver's clock when it checked.
	Now time.Time
	// Tolerance is the distance that was allowed in either direction.
	Tolerance time.Duration
}

// Error says how far the timestamp is from now.
func (e *TimestampError) Error() string {
	if e.tooOld() {
		return fmt.Sprintf("receiver: timestamp too old: %s behind the receiver's clock, tolerance %s",
			e.Now.Sub(e.Timestamp).Round(time.Second), e.Tolerance)
	}
	return fmt.Sprintf("receiver: timestamp too new: %s ahead of the receiver's clock, tolerance %s",
		e.Timestamp.Sub(e.Now).Round(time.Second), e.Tolerance)
}

// Is matches ErrTimestampTooOld or ErrTimestampTooNew, whichever applies.
func (e *TimestampError) Is(target error) bool {
	if e.tooOld() {
		return target == ErrTimestampTooOld
	}
	return target == ErrTimestampTooNew
}

func (e *TimestampError) tooOld() bool { return e.Timestamp.Before(e.Now) }

// VerifierConfig configures a [Verifier].
type VerifierConfig struct {
	// Secrets are the subscription's signing secrets ("whsec_…"), which
	// check "v1" (HMAC-SHA256) signatures. During a rotation list both the
	// new and the previous secret: a delivery is accepted when any one of
	// them signed it. webhookd signs with both for 24 hours after a
	// rotation, so either alone also works.
	Secrets []string
	// PublicKeys are the subscription's Ed25519 public keys ("whpk_…"),
	// which check "v1a" signatures, for a subscription whose signature
	// scheme is ed25519. Rotation works as for Secrets: list both keys, or
	// either. At least one secret or public key is required; with both, a
	// delivery is accepted when any one of them matches.
	PublicKeys []string
	// Tolerance is the accepted distance between webhook-timestamp and
	// Now, in both directions; zero means DefaultTolerance. A future
	// timestamp is refused too, because it would stretch the window in
	// which a captured request can be replayed.
	Tolerance time.Duration
	// Now is the receiver's clock; nil means time.Now. Tests pin it.
	Now func() time.Time
}

// validate checks the config without changing it.
func (c VerifierConfig) validate() error {
	if len(c.Secrets) == 0 && len(c.PublicKeys) == 0 {
		return fmt.Errorf("%w: no secret or public key given", ErrInvalidSecret)
	}
	if c.Tolerance < 0 {
		return fmt.Errorf("receiver: negative tolerance %s", c.Tolerance)
	}
	return nil
}

// Verifier checks the signature and timestamp of deliveries: the one
// verifier of webhookd's deliveries, in merchants' code and in webhookd's
// own tests. It is immutable and safe for concurrent use.
type Verifier struct {
	// keys are the secrets' HMAC keys, each non-empty.
	keys []Key
	// publicKeys check "v1a" values.
	publicKeys []PublicKey
	tolerance  time.Duration
	now        func() time.Time
}

// NewVerifier returns a Verifier for cfg. It refuses a secret that
// [ParseSecret] refuses or a public key that [ParsePublicKey] refuses, once
// surrounding spaces (of a paste, a file's last newline) are trimmed; the
// error matches [ErrInvalidSecret] or [ErrInvalidPublicKey] and never
// quotes a secret, as it may end up in logs.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	v := &Verifier{tolerance: cfg.Tolerance, now: cfg.Now}
	if v.tolerance == 0 {
		v.tolerance = DefaultTolerance
	}
	if v.now == nil {
		v.now = time.Now
	}
	for i, s := range cfg.Secrets {
		k, err := ParseSecret(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("secret #%d: %w", i+1, err)
		}
		v.keys = append(v.keys, k)
	}
	for i, s := range cfg.PublicKeys {
		k, err := ParsePublicKey(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("public key #%d: %w", i+1, err)
		}
		v.publicKeys = append(v.publicKeys, k)
	}
	return v, nil
}

// Verify checks the Standard Webhooks headers in h against body, the raw
// request body exactly as received: read it before any JSON decoding, since
// re-encoding changes the bytes and breaks the signature.
//
// It returns nil when webhook-timestamp is within the tolerance of the
// clock and some "v1," value of webhook-signature is the HMAC-SHA256 of
// "{webhook-id}.{webhook-timestamp}.{body}" under one of the secrets, or
// some "v1a," value is the Ed25519 signature of that content under one of
// the public keys. Values of a version the Verifier has no key for are
// ignored, as the specification asks.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	return v.VerifyValues(headerValue(h, HeaderID), headerValue(h, HeaderTimestamp), headerValue(h, HeaderSignature), body)
}

// VerifyValues is [Verifier.Verify] for callers that hold the three header
// values rather than an [http.Header], such as a queue consumer.
func (v *Verifier) VerifyValues(id, timestamp, signature string, body []byte) error {
	switch {
	case id == "":
		return &MissingHeaderError{Header: HeaderID}
	case timestamp == "":
		return &MissingHeaderError{Header: HeaderTimestamp}
	case signature == "":
		return &MissingHeaderError{Header: HeaderSignature}
	}
	ts, err := ParseTimestamp(timestamp)
	if err != nil {
		return err
	}
	// Refuse future timestamps too: one would extend the replay window of
	// a captured request by however far ahead it is.
	now := v.now()
	if age := now.Sub(ts); age > v.tolerance || age < -v.tolerance {
		return &TimestampError{Timestamp: ts, Now: now, Tolerance: v.tolerance}
	}
	if !matchSignature(id, timestamp, signature, body, v.keys) &&
		!matchEd25519Signature(id, timestamp, signature, body, v.publicKeys) {
		return ErrNoMatchingSignature
	}
	return nil
}

// headerValue reads a header by its canonical name and falls back to the
// exact lower-case key, for maps built by hand (http.Header{"webhook-id": …})
// that [http.Header.Get] would miss.
func headerValue(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	if vs := h[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}
