package receiver

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

// Names of the Standard Webhooks headers every delivery carries.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every signing secret webhookd issues; the rest of the
// secret is the standard base64 encoding of the HMAC key.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock, in either direction, when [VerifierConfig.Tolerance] is
// zero. It bounds how long a captured request can be replayed while allowing
// for modest clock skew.
const DefaultTolerance = 5 * time.Minute

// signatureVersion tags an HMAC-SHA256 signature. Values of other versions
// may appear in webhook-signature and are skipped.
const signatureVersion = "v1"

// maxTimestampDigits keeps the timestamp well inside int64 and refuses an
// absurdly long header before parsing it.
const maxTimestampDigits = 15

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
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
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
		v.keys = append(v.keys, k)
	}
	return v, nil
}

// parseSecret decodes a "whsec_…" secret into its HMAC key. The prefix is
// required: every secret webhookd issues has it, so a value without it is
// almost certainly the wrong string (an API key, a truncated paste).
func parseSecret(s string) ([]byte, error) {
	raw, ok := strings.CutPrefix(strings.TrimSpace(s), SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: missing %q prefix", ErrInvalidSecret, SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		// The base64 error carries only an offset, never the input.
		return nil, fmt.Errorf("%w: key is not standard base64: %w", ErrInvalidSecret, err)
	}
	if len(key) == 0 {
		// An HMAC under an empty key is a value anyone can compute.
		return nil, fmt.Errorf("%w: empty key after %q", ErrInvalidSecret, SecretPrefix)
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
	return v.VerifyValues(header(h, HeaderID), header(h, HeaderTimestamp), header(h, HeaderSignature), body)
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
	ts, err := parseTimestamp(timestamp)
	if err != nil {
		return err
	}
	now := v.now()
	if age := now.Sub(ts); age > v.tolerance || age < -v.tolerance {
		return &TimestampError{Timestamp: ts, Now: now, Tolerance: v.tolerance}
	}

	// The timestamp is canonical decimal (see parseTimestamp), so the
	// header text is exactly what the sender formatted and signed.
	var enc [44]byte // base64 of a SHA-256 digest
	for _, key := range v.keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(timestamp))
		mac.Write([]byte{'.'})
		mac.Write(body)
		base64.StdEncoding.Encode(enc[:], mac.Sum(nil))
		// Every value is compared, whatever comes before it: senders may
		// add versions this package does not know.
		for _, field := range strings.Fields(signature) {
			version, sig, ok := strings.Cut(field, ",")
			if !ok || version != signatureVersion {
				continue
			}
			// hmac.Equal takes the same time whichever byte differs, so
			// timing tells a forger nothing about how close a guess was.
			if hmac.Equal([]byte(sig), enc[:]) {
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}

// header reads a header by its canonical name and falls back to the exact
// lower-case key, for maps built by hand (http.Header{"webhook-id": …})
// that [http.Header.Get] would miss.
func header(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	if vs := h[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// parseTimestamp accepts Unix seconds written as plain decimal digits, with
// no sign, no leading zero and no space. Being this strict means the header
// text is the one form the sender signed, so it can be fed to the MAC as is:
// "+1", "01" and "1" are one number but three different signed contents.
func parseTimestamp(s string) (time.Time, error) {
	if len(s) > maxTimestampDigits {
		// Not quoted: the header is the sender's and may be huge.
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
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %w", ErrInvalidTimestamp, err)
	}
	return time.Unix(n, 0), nil
}
