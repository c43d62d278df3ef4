package receiver

import (
	"fmt"
	"strconv"
	"time"
)

// maxTimestampDigits keeps the timestamp well inside int64 (and inside the
// range where [time.Time] arithmetic is exact): 15 digits reach year 31
// million.
const maxTimestampDigits = 15

// FormatTimestamp writes t as a webhook-timestamp header: Unix seconds in
// decimal digits, the form [ParseTimestamp] accepts. Package signer writes
// every delivery's timestamp with it.
func FormatTimestamp(t time.Time) string {
	return strconv.FormatInt(t.Unix(), 10)
}

// ParseTimestamp reads a webhook-timestamp header. It accepts Unix seconds
// written as plain decimal digits with no sign, no leading zero and no
// spaces, and fails with an error matching [ErrInvalidTimestamp] otherwise.
// Being this strict means the header text is the canonical form the sender
// signed, so it can be fed to the MAC as is; anything looser would be
// ambiguous ("+1", "01" and "1" are one number but three different signed
// contents).
func ParseTimestamp(s string) (time.Time, error) {
	if len(s) > maxTimestampDigits {
		// Not quoted: the header is attacker-controlled and may be huge.
		return time.Time{}, fmt.Errorf("%w: longer than %d digits", ErrInvalidTimestamp, maxTimestampDigits)
	}
	if s == "" || (len(s) > 1 && s[0] == '0') {
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
