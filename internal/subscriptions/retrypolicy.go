package subscriptions

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// Bounds of a retry policy (docs/delivery-controls.md).
const (
	// MaxRetryAttempts is the most attempts a policy may make, the first
	// included: the engine's default makes as many.
	MaxRetryAttempts = 15
	// MaxRetryDelays is the most delays its schedule may list.
	MaxRetryDelays = MaxRetryAttempts - 1
	// MinRetryDelay is the shortest delay between two attempts.
	MinRetryDelay = time.Second
	// MaxRetrySpan bounds the whole schedule: a delivery is kept no longer
	// than its event (store.Retention), and an attempt planned past that
	// would find nothing to send.
	MaxRetrySpan = store.Retention
	// MinAttemptTimeout and MaxAttemptTimeout bound timeout_seconds. The
	// engine's WEBHOOKD_DELIVERY_TIMEOUT still caps it when lower.
	MinAttemptTimeout = 1
	MaxAttemptTimeout = 25
	// maxIntervalText bounds one delay as written, in bytes: "29d23h59m59s"
	// is 12.
	maxIntervalText = 16
)

// RetryPolicyNames are the names of a retry policy's fields on one
// surface: timeout_seconds on /v1, timeoutSeconds on the legacy routes
// (schedule is one word on both).
type RetryPolicyNames struct {
	Timeout string
}

// intervalSyntax is a delay as a merchant writes it: whole numbers of
// days, hours, minutes and seconds, in that order, each at most once and
// at least one of them, as in "5s", "90s", "1h30m", "2d". No sign, no
// fraction, no exponent, no space, no smaller unit: a delay is whole
// seconds. Each number has at most 7 digits, so that no sum overflows.
var intervalSyntax = regexp.MustCompile(`^(?:([0-9]{1,7})d)?(?:([0-9]{1,7})h)?(?:([0-9]{1,7})m)?(?:([0-9]{1,7})s)?$`)

// intervalUnits are the seconds of the units of intervalSyntax's groups.
var intervalUnits = [4]int64{86400, 3600, 60, 1}

// ParseInterval reads one delay written as intervalSyntax says, and
// returns it in seconds; false when it is not written so.
func ParseInterval(text string) (int64, bool) {
	if text == "" || len(text) > maxIntervalText {
		return 0, false
	}
	m := intervalSyntax.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	var total int64
	for i, unit := range intervalUnits {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil {
			return 0, false
		}
		total += n * unit
	}
	return total, true
}

// FormatInterval writes seconds in the syntax ParseInterval reads, in
// its largest units: 90 is "1m30s", 86400 "1d", 0 "0s".
func FormatInterval(seconds int64) string {
	if seconds <= 0 {
		return "0s"
	}
	var b strings.Builder
	for i, unit := range intervalUnits {
		if n := seconds / unit; n > 0 {
			b.WriteString(strconv.FormatInt(n, 10))
			b.WriteByte("dhms"[i])
			seconds -= n * unit
		}
	}
	return b.String()
}

// ParseRetryPolicy reads a retry policy as the API takes it: null for the
// engine's, or {"schedule": ["5s", "1m", …], "timeout_seconds": 1–25},
// either member absent or null for the engine's. An object with neither
// is the engine's too (nil). A bad value is refused under its own name,
// as in retry_policy.schedule[3].
func ParseRetryPolicy(param string, names RetryPolicyNames, raw json.RawMessage) (*store.RetryPolicy, error) {
	obj, err := objectMembers(param, "retry_policy", raw, fmt.Sprintf(
		`%s must be an object {"schedule": ["5s", "1m", …], "%s": %d–%d}, or null for the engine's schedule and timeout.`,
		param, names.Timeout, MinAttemptTimeout, MaxAttemptTimeout), "schedule", names.Timeout)
	if err != nil || obj == nil {
		return nil, err
	}
	schedule, err := parseSchedule(param+".schedule", obj["schedule"])
	if err != nil {
		return nil, err
	}
	timeout, err := parseAttemptTimeout(param+"."+names.Timeout, obj[names.Timeout])
	if err != nil {
		return nil, err
	}
	if schedule == nil && timeout == 0 {
		return nil, nil
	}
	return &store.RetryPolicy{Schedule: schedule, TimeoutSeconds: timeout}, nil
}

// parseSchedule reads a schedule: absent or null is nil (the engine's),
// else a list of at most MaxRetryDelays delays, each from MinRetryDelay
// on, MaxRetrySpan at most in all. An empty list is one attempt and no
// retry.
func parseSchedule(param string, raw json.RawMessage) ([]int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	shape := invalid.Value(param, "retry_schedule_invalid", fmt.Sprintf(
		`%s must be a list of at most %d delays such as ["5s", "1m", "1h30m", "1d"] (whole days, hours, minutes and seconds, at least 1s each).`,
		param, MaxRetryDelays))
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, shape
	}
	if len(items) > MaxRetryDelays {
		return nil, invalid.Value(param, "retry_schedule_too_long", fmt.Sprintf(
			"%s may list at most %d delays: a delivery is attempted at most %d times.", param, MaxRetryDelays, MaxRetryAttempts))
	}
	out := make([]int64, len(items))
	var span int64
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", param, i)
		var text string
		if err := json.Unmarshal(item, &text); err != nil {
			return nil, invalid.Value(p, "retry_delay_invalid", p+` must be a string such as "30s", "5m", "2h" or "1d".`)
		}
		seconds, ok := ParseInterval(text)
		if !ok {
			return nil, invalid.Value(p, "retry_delay_invalid", p+` must be whole days, hours, minutes and seconds in that order, such as "30s", "1h30m" or "1d", not `+invalid.Quote(text)+".")
		}
		if seconds < int64(MinRetryDelay/time.Second) {
			return nil, invalid.Value(p, "retry_delay_too_short", p+" must be at least 1s.")
		}
		span += seconds
		if span > int64(MaxRetrySpan/time.Second) {
			return nil, invalid.Value(p, "retry_schedule_too_long", fmt.Sprintf(
				"%s's delays add up to more than %s, how long a delivery is kept; %s passes it.", param, FormatInterval(int64(MaxRetrySpan/time.Second)), p))
		}
		out[i] = seconds
	}
	return out, nil
}

// parseAttemptTimeout reads timeout_seconds: absent or null is 0 (the
// engine's), else a whole number of seconds from MinAttemptTimeout to
// MaxAttemptTimeout.
func parseAttemptTimeout(param string, raw json.RawMessage) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var v int
	if err := json.Unmarshal(raw, &v); err != nil || v < MinAttemptTimeout || v > MaxAttemptTimeout {
		return 0, invalid.Value(param, "retry_timeout_range", fmt.Sprintf(
			"%s must be a whole number of seconds from %d to %d, or null for the engine's.", param, MinAttemptTimeout, MaxAttemptTimeout))
	}
	return v, nil
}

// RetryPolicyView is how the API shows a retry policy: null for the
// engine's, or its schedule (each delay as FormatInterval writes it;
// null for the engine's) and timeout (null for the engine's) under the
// surface's names.
func RetryPolicyView(names RetryPolicyNames, p *store.RetryPolicy) map[string]any {
	if p == nil {
		return nil
	}
	var schedule []string
	if p.Schedule != nil {
		schedule = make([]string, len(p.Schedule))
		for i, s := range p.Schedule {
			schedule[i] = FormatInterval(s)
		}
	}
	var timeout *int
	if p.TimeoutSeconds > 0 {
		timeout = &p.TimeoutSeconds
	}
	return map[string]any{"schedule": schedule, names.Timeout: timeout}
}

// errRetryPolicyPoll refuses a retry policy on a poll subscription: its
// deliveries are read, never attempted, so there is nothing to retry.
func errRetryPolicyPoll(param string) error {
	return invalid.Value(param, "retry_policy_poll",
		param+" is for delivered subscriptions; a poll subscription's deliveries are read by the merchant and never attempted.")
}

// checkRetryPolicyDelivered refuses an update that sets a retry policy
// on a poll subscription of st, as a create with both is refused. (A
// function, not a Registry method: the Registry has enough of those.)
func checkRetryPolicyDelivered(ctx context.Context, st Store, merchantID string, id uuid.UUID, u store.SubscriptionUpdate) error {
	if !u.SetRetryPolicy || u.RetryPolicy == nil {
		return nil
	}
	cur, err := st.GetSubscription(ctx, merchantID, id)
	if err != nil {
		return err
	}
	if cur.Destination.Type() == DestinationPoll {
		return errRetryPolicyPoll("retry_policy")
	}
	return nil
}
