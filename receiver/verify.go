package receiver

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/webhookd/webhookd/signer"
)

// Names of the Standard Webhooks headers every delivery carries.
const (
	HeaderID        = signer.HeaderID
	HeaderTimestamp = signer.HeaderTimestamp
	HeaderSignature = signer.HeaderSignature
)

// SecretPrefix starts every signing secret webhookd issues; the rest of the
// secret is the standard base64 encoding of the HMAC key.
const SecretPrefix = signer.SecretPrefix

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock, in either direction, when [VerifierConfig.Tolerance] is
// zero. It bounds how long a captured request can be replayed while allowing
// for modest clock skew.
const DefaultTolerance = signer.DefaultTolerance

// Errors of [Verifier.Verify] and [NewVerifier]. Verify wraps them with
// detail: test with [errors.Is]. A receiver answers every Verify error with a
// 4xx status and must not act on the body.
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
	// signature of this delivery under any of the secrets.
	ErrNoMatchingSignature = errors.New("receiver: no matching signature")
	// ErrInvalidSecret: a signing secret is not "whsec_" followed by
	// non-empty standard base64. Returned by NewVerifier, never by Verify.
	ErrInvalidSecret = errors.New("receiver: invalid secret")
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
	// Secrets are the subscription's signing secrets ("whsec_…"); at least
	// one. During a rotation list both the new and the previous secret: a
	// delivery is accepted when any one of them signed it. webhookd signs
	// with both for 24 hours after a rotation, so either alone also works.
	Secrets []string
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
	if len(c.Secrets) == 0 {
		return fmt.Errorf("%w: no secret given", ErrInvalidSecret)
	}
	if c.Tolerance < 0 {
		return fmt.Errorf("receiver: negative tolerance %s", c.Tolerance)
	}
	return nil
}

// Verifier checks the signature and timestamp of deliveries. It is
// immutable and safe for concurrent use.
type Verifier struct {
	// signatures matches webhook-signature against the secrets' keys.
	signatures signer.Verifier
	tolerance  time.Duration
	now        func() time.Time
}

// NewVerifier returns a Verifier for cfg. It refuses a secret that is not
// "whsec_" followed by standard base64 (error matching [ErrInvalidSecret]);
// error messages never quote a secret, as they may end up in logs.
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
		k, err := parseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("secret #%d: %w", i+1, err)
		}
		v.signatures.Keys = append(v.signatures.Keys, k)
	}
	return v, nil
}

// parseSecret decodes a "whsec_…" secret (surrounding spaces of a paste
// ignored) into its HMAC key, as package signer does: the prefix is
// required, and an empty key refused, since an HMAC under it is a value
// anyone can compute. Error messages never quote a secret.
func parseSecret(s string) (signer.Key, error) {
	key, err := signer.ParseSecret(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSecret, err)
	}
	return key, nil
}

// Verify checks the Standard Webhooks headers in h against body, the raw
// request body exactly as received: read it before any JSON decoding, since
// re-encoding changes the bytes and breaks the signature.
//
// It returns nil when webhook-timestamp is within the tolerance of the
// clock and some "v1," value of webhook-signature is the HMAC-SHA256 of
// "{webhook-id}.{webhook-timestamp}.{body}" under one of the secrets.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	return v.VerifyValues(signer.HeaderValue(h, HeaderID), signer.HeaderValue(h, HeaderTimestamp), signer.HeaderValue(h, HeaderSignature), body)
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
	ts, err := signer.ParseTimestamp(timestamp)
	if err != nil {
		// signer's message says what is wrong without quoting a long header.
		return fmt.Errorf("%w: %w", ErrInvalidTimestamp, err)
	}
	now := v.now()
	if age := now.Sub(ts); age > v.tolerance || age < -v.tolerance {
		return &TimestampError{Timestamp: ts, Now: now, Tolerance: v.tolerance}
	}
	if err := v.signatures.MatchSignature(id, timestamp, signature, body); err != nil {
		return fmt.Errorf("%w: %w", ErrNoMatchingSignature, err)
	}
	return nil
}
