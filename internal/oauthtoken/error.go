package oauthtoken

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/webhookd/webhookd/internal/failtext"
)

// Error is a token that could not be had: the token endpoint answered
// with an error, could not be reached, or a waiting worker gave up. The
// delivery path records it as a failed attempt with error code
// "oauth_token" and Status. Its text holds no secret: not the client
// secret, the assertion, nor the body the endpoint answered with.
type Error struct {
	// Status is the token endpoint's HTTP status, or 0 when it gave none
	// (unreachable, refused by the SSRF guard, timed out).
	Status int
	// Code is RFC 6749's error parameter ("invalid_client"), when the
	// endpoint gave one.
	Code string
	// said is what went wrong when the endpoint gave no answer, in the
	// merchant's words (failtext): it is what Error shows and what is
	// shared with the other workers.
	said string
	// err is the cause when the endpoint gave no answer, in its own words
	// (an address, the DNS server, the egress proxy): for the operator's
	// log alone, never shown (Unwrap).
	err error
}

// unanswered is the Error of a token endpoint that gave no usable answer:
// err in the merchant's words, or otherwise when failtext has none.
func unanswered(err error, otherwise string) *Error {
	said := failtext.Describe(err)
	if said == "" {
		said = otherwise
	}
	return &Error{said: said, err: err}
}

// rfc6749Code is an error code as RFC 6749 §5.2 spells them
// (invalid_client): anything else the endpoint sends in its place is not
// shown.
var rfc6749Code = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// Error implements error.
func (e *Error) Error() string {
	switch {
	case e.Status != 0 && e.Code != "":
		return fmt.Sprintf("oauth token endpoint answered %d %s (%s)", e.Status, http.StatusText(e.Status), e.Code)
	case e.Status != 0:
		return fmt.Sprintf("oauth token endpoint answered %d %s", e.Status, http.StatusText(e.Status))
	case e.said != "":
		return "oauth token endpoint: " + e.said
	}
	return "oauth token endpoint failed"
}

// Unwrap gives the cause of a token endpoint that gave no answer, for the
// operator's log.
func (e *Error) Unwrap() error { return e.err }

// StatusOf is the token endpoint's HTTP status err carries, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}
