// Package invalid describes input that breaks a rule of the domain: which
// field, which rule, and a message a person can act on. The domain types
// (the publisher, subscriptions, keys) return it; every surface renders it
// in its own format (the HTTP API as 400 parameter_missing or
// parameter_invalid, the worker as a log line and a metric label), so that
// a rule is written once and reads the same everywhere.
package invalid

import (
	"errors"

	"github.com/google/uuid"
)

// Error is one broken rule.
type Error struct {
	// Param names the field at fault as the HTTP surface spells it
	// ("merchant_id", "payload", "events[2].type").
	Param string
	// Rule names the rule in a few words fit for a metric label
	// ("type_unknown", "payload_not_object"). It never holds input.
	Rule string
	// Message tells a person what is wrong and what is allowed.
	Message string
	// Missing is set when the field is absent or empty rather than wrong.
	Missing bool
}

// Error implements error.
func (e *Error) Error() string { return e.Param + ": " + e.Message }

// Missing reports a required field that is absent or empty.
func Missing(param string) *Error {
	return &Error{Param: param, Rule: RuleMissing, Message: param + " is required.", Missing: true}
}

// Value reports a field whose value breaks rule.
func Value(param, rule, message string) *Error {
	return &Error{Param: param, Rule: rule, Message: message}
}

// Within is e with its Param qualified by prefix (the element of a batch
// it came from, e.g. "events[3].").
func (e *Error) Within(prefix string) *Error {
	c := *e
	c.Param = prefix + e.Param
	if c.Missing {
		c.Message = c.Param + " is required."
	}
	return &c
}

// As returns the *Error err holds, or nil.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// RuleMissing is the Rule of a required field left absent or empty.
const RuleMissing = "missing"

// RuleTooLarge is the Rule of a value over its size limit; the HTTP API
// answers it with 413 payload_too_large rather than 400.
const RuleTooLarge = "too_large"

// maxShown is how many bytes of a value a message shows.
const maxShown = 64

// Cut is a value as a message shows it: cut so that a huge input cannot
// make a huge answer.
func Cut(s string) string {
	if len(s) > maxShown {
		return s[:maxShown] + "…"
	}
	return s
}

// Quote is Cut(s) in double quotes, as messages name a value.
func Quote(s string) string { return `"` + Cut(s) + `"` }

// MustBeUUID is the message of a field param that must hold a UUID and
// does not.
func MustBeUUID(param string) string { return param + " must be a UUID." }

// NotUUID reports a field that must hold a UUID and does not.
func NotUUID(param, rule string) *Error { return Value(param, rule, MustBeUUID(param)) }

// UUID parses s, which must be a UUID in its hyphenated form (36
// characters: an id receivers see, or look up, as written), or returns
// NotUUID(param, rule).
func UUID(param, rule, s string) (uuid.UUID, *Error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.Nil, NotUUID(param, rule)
	}
	return id, nil
}
