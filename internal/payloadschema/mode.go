// Package payloadschema checks a published payload against its event
// type's JSON Schema (internal/catalogue), as the operator's
// WEBHOOKD_PAYLOAD_VALIDATION asks: not at all, with a warning, or
// refusing the event.
package payloadschema

import "fmt"

// Mode is what publishing does with a payload that does not match its
// type's schema.
type Mode string

// The modes, as WEBHOOKD_PAYLOAD_VALIDATION spells them.
const (
	// Off checks nothing: the payload need only be a JSON object within
	// the size limit, as before schemas existed.
	Off Mode = "off"
	// Warn publishes the event anyway, logs the mismatch and counts it
	// (webhookd_payload_schema_mismatches_total).
	Warn Mode = "warn"
	// Enforce refuses the event: a 400 validation_error naming the member
	// at fault, or a producer refusal of rule payload_schema.
	Enforce Mode = "enforce"
)

// DefaultMode is the mode when the operator sets none: today's behaviour,
// at no cost. The schemas of returns, deposits and conversions are
// webhookd's reading of shapes the core API owns, so an operator turns
// on warn first, reads the mismatches, then enforce.
const DefaultMode = Off

// ParseMode reads WEBHOOKD_PAYLOAD_VALIDATION strictly: one of the three
// modes, in lower case; anything else is an error, so that a misspelt
// "enfroce" stops the engine instead of leaving it unchecked.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Off, Warn, Enforce:
		return m, nil
	}
	return "", fmt.Errorf("must be off, warn or enforce, not %q", s)
}
