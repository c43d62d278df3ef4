package destination

import (
	"context"
	"errors"
	"fmt"

	"github.com/webhookd/webhookd/internal/failtext"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Attempt error codes of destinations (DESIGN.md's codes are the HTTP
// exchange's; these name what a broker or a cloud service did instead).
// Every kind maps its failures to these.
const (
	// CodeUnreachable: no connection to the target (refused, reset, DNS,
	// a closed channel).
	CodeUnreachable = "broker_unreachable"
	// CodeRefused: the target answered and would not take the message
	// (no such exchange, topic, stream, bucket or queue; a message it
	// rejected or found too large).
	CodeRefused = "broker_refused"
	// CodeNotConfirmed: the message was sent but the target never
	// confirmed it (a nack, or no confirmation before the timeout).
	CodeNotConfirmed = "not_confirmed"
	// CodeAuthFailed: the target refused the destination's credentials
	// or their rights.
	CodeAuthFailed = "auth_failed"
	// CodeTooLarge: an answer longer than what is read of it.
	CodeTooLarge = "response_too_large"
	// CodeInvalid: the stored destination breaks a rule of this build;
	// nothing was sent.
	CodeInvalid = "destination_invalid"
	// CodePlaintext: the stored destination would connect in clear and
	// the operator does not allow it; nothing was sent.
	CodePlaintext = "destination_plaintext_refused"
)

// Failure is a failed send and its attempt error code, with what the
// merchant is told of it.
type Failure struct {
	// Code is one of the codes above.
	Code string
	// Said is the failure in the merchant's words: the target's own
	// answer ("the broker answered 404 NOT_FOUND") or webhookd's; never
	// the text of a network, operating system or client library error,
	// which names this server's addresses, files or proxy. "" lets
	// Describe find words.
	Said string
	// Err is the cause, for the worker's log.
	Err error
}

// Error implements error.
func (f *Failure) Error() string {
	if f.Err == nil {
		return f.Code + ": " + f.Said
	}
	return f.Code + ": " + f.Err.Error()
}

// Unwrap is the cause.
func (f *Failure) Unwrap() error { return f.Err }

// Fail is a Failure of code, said in the merchant's words, caused by err.
func Fail(code, said string, err error) *Failure { return &Failure{Code: code, Said: said, Err: err} }

// codeWords are what a failure of each code says when nothing more
// specific can be said.
var codeWords = map[string]string{
	CodeUnreachable:  "no connection to the broker",
	CodeRefused:      "the broker refused the message",
	CodeNotConfirmed: "the broker did not confirm the message in time",
	CodeAuthFailed:   "the broker refused the credentials",
	CodeTooLarge:     "the answer was larger than webhookd reads of it",
}

// Classify is the attempt error code and the merchant's words of a
// failed send: a *Failure's own, else what the error's kind says
// (a timeout is not_confirmed, an answer past the bound
// response_too_large, anything else broker_unreachable), in words that
// never quote the error's text.
func Classify(err error) (code, said string) {
	var f *Failure
	code = CodeUnreachable
	switch {
	case errors.As(err, &f):
		code, said = f.Code, f.Said
	case failtext.Of(err) == failtext.TooLarge:
		code = CodeTooLarge
	case errors.Is(err, context.DeadlineExceeded):
		code = CodeNotConfirmed
	}
	if said == "" {
		said = failtext.Describe(err)
	}
	if said == "" {
		said = codeWords[code]
	}
	if said == "" {
		said = "the attempt failed"
	}
	return code, said
}

// Refused is a stored value that breaks a rule of this build, as the
// attempt's failure: destination_invalid in the rule's own words (an
// *invalid.Error names the field, never its value), else a fixed phrase.
func Refused(err error) *Failure {
	said := "the stored value breaks a rule of this server; update the subscription"
	if bad := invalid.As(err); bad != nil {
		said = bad.Message
	}
	return Fail(CodeInvalid, said, err)
}

// ConfigOf is cfg as a kind's own config type T (or *T), which its Open
// was given by the registry; another type is destination_invalid, typ
// naming the kind.
func ConfigOf[T any](typ string, cfg Config) (T, error) {
	if c, ok := cfg.(T); ok {
		return c, nil
	}
	if p, ok := any(cfg).(*T); ok && p != nil {
		return *p, nil
	}
	var zero T
	return zero, Fail(CodeInvalid, "the destination is not a "+typ+" destination", fmt.Errorf("destination: %s given a config of type %T", typ, cfg))
}
