package merchants

import (
	"regexp"
	"strconv"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// RuleRetentionDays is the rule a bad retention_days breaks.
const RuleRetentionDays = "retention_days_invalid"

// retentionDigits is the one form retention_days takes: a plain JSON
// integer of one or two digits (no sign, fraction, exponent or string).
var retentionDigits = regexp.MustCompile(`^[0-9]{1,2}$`)

// ParseRetentionDays reads a merchant's retention_days from its JSON
// text: an integer from 1 to the engine's retention (store.RetentionDays),
// anything else refused by name.
func ParseRetentionDays(raw []byte) (int, error) {
	bad := invalid.Value("retention_days", RuleRetentionDays,
		"retention_days must be a whole number of days from 1 to "+strconv.Itoa(store.RetentionDays)+".")
	if !retentionDigits.Match(raw) {
		return 0, bad
	}
	days, err := strconv.Atoi(string(raw))
	if err != nil || days < 1 || days > store.RetentionDays {
		return 0, bad
	}
	return days, nil
}
