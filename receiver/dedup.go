package receiver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Defaults of the duplicate stores (this package's and those of
// redisdedup and pgdedup).
const (
	// DefaultLease is how long a claim holds an event id while its handler
	// runs. It exceeds webhookd's 25-second delivery timeout, so that the
	// engine's retry of a slow attempt finds the claim still held; a
	// process that dies mid-handler frees the id when the lease ends.
	DefaultLease = time.Minute
	// DefaultRetention is how long a handled event id is remembered.
	// webhookd keeps events, and lets merchants redeliver them, for 30 days,
	// so no duplicate can arrive later than that.
	DefaultRetention = 30 * 24 * time.Hour
)

// ClaimState is what [Deduplicator.Claim] found for an event id.
type ClaimState int

const (
	// Claimed: the id is new (or its earlier claim was released or ran out)
	// and is now held by the caller, who must Complete or Release it.
	Claimed ClaimState = iota + 1
	// InProgress: another delivery of the same id holds a live claim; its
	// handler has not finished. Answer non-2xx so that webhookd retries:
	// the other handler may still fail.
	InProgress
	// Done: a delivery of this id was handled successfully already.
	Done
)

// String names the state, for logs.
func (s ClaimState) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case InProgress:
		return "in progress"
	case Done:
		return "done"
	}
	return "unknown"
}

// Claim is the result of [Deduplicator.Claim].
type Claim struct {
	// ID is the event id (webhook-id) claimed.
	ID string
	// Token tells this claim from a later one on the same id, so that a
	// handler whose lease ran out cannot release a newer holder's claim.
	Token string
	// State says whether the caller holds the claim.
	State ClaimState
}

// Deduplicator remembers which event ids were handled, so that a repeated
// delivery is acknowledged without running the handler again.
//
// Marking happens after success: Claim holds an id for a lease while the
// handler runs; Complete marks it done, for the retention; Release frees it
// at once so that webhookd's retry runs the handler again. Implementations
// are safe for concurrent use, and a Claim is atomic: two concurrent
// deliveries of one id never both get [Claimed].
type Deduplicator interface {
	// Claim takes the id for the lease unless it is done or held.
	Claim(ctx context.Context, id string) (Claim, error)
	// Complete marks a claimed id as done for the retention.
	Complete(ctx context.Context, c Claim) error
	// Release frees a claimed id if c still holds it.
	Release(ctx context.Context, c Claim) error
}

// NewClaimToken returns a random token for a [Claim], for implementations
// of [Deduplicator].
func NewClaimToken() string {
	var b [16]byte
	// crypto/rand.Read never fails (it crashes the program instead).
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
