package oauthtoken

import (
	"errors"
	"fmt"
	"net/http"
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
	// err is the cause when the endpoint gave no answer.
	err error
}

// Error implements error.
func (e *Error) Error() string {
	switch {
	case e.Status != 0 && e.Code != "":
		return fmt.Sprintf("oauth token endpoint answered %d %s (%s)", e.Status, http.StatusText(e.Status), e.Code)
	case e.Status != 0:
		return fmt.Sprintf("oauth token endpoint answered %d %s", e.Status, http.StatusText(e.Status))
	case e.err != nil:
		return "oauth token endpoint: " + e.err.Error()
	}
	return "oauth token endpoint failed"
}

// Unwrap gives the cause of a token endpoint that gave no answer.
func (e *Error) Unwrap() error { return e.err }

// StatusOf is the token endpoint's HTTP status err carries, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}
