package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// RetryPolicy is a subscription's own retry policy as stored (the
// retry_policy columns of subscriptions and deliveries): the delays
// between a delivery's attempts and the timeout of one attempt. Package
// subscriptions checks it before it is stored; the store keeps it as
// given.
type RetryPolicy struct {
	// Schedule is the delays between consecutive attempts, in whole
	// seconds: a delivery is attempted len(Schedule)+1 times. nil: the
	// engine's schedule (WEBHOOKD_RETRY_SCHEDULE).
	Schedule []int64 `json:"schedule"`
	// TimeoutSeconds bounds one attempt, never beyond the engine's
	// WEBHOOKD_DELIVERY_TIMEOUT; 0: the engine's.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
}

// Delays are the schedule's delays as durations; nil for the engine's.
func (p *RetryPolicy) Delays() []time.Duration {
	if p == nil || p.Schedule == nil {
		return nil
	}
	out := make([]time.Duration, len(p.Schedule))
	for i, s := range p.Schedule {
		out[i] = time.Duration(s) * time.Second
	}
	return out
}

// Timeout is the policy's attempt timeout; 0 for the engine's.
func (p *RetryPolicy) Timeout() time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(p.TimeoutSeconds) * time.Second
}

// retryPolicyArg is a policy's column value as JSON text (nil: NULL): as
// for authenticationArgs, text and a cast in the statement, so that it
// also goes through PgBouncer's simple protocol.
func retryPolicyArg(p *RetryPolicy) (*string, error) {
	if p == nil {
		return nil, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("retry policy: %w", err)
	}
	text := string(b)
	return &text, nil
}

// leasedRetryPolicy is the lease's assignment and read of a delivery's
// policy (table aliases d and s): the one it keeps if its first attempt
// already took one, else its subscription's now, {} standing for the
// engine's, so that from this lease on the delivery keeps it whatever
// becomes of the subscription's. The read gives NULL for {}: most
// deliveries keep the engine's, and a NULL costs the lease no JSON
// decoding.
const (
	pinRetryPolicy    = `retry_policy = coalesce(d.retry_policy, s.retry_policy, '{}'::jsonb)`
	leasedRetryPolicy = `nullif(d.retry_policy, '{}'::jsonb)`
)
