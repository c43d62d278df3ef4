package admin

import (
	"net/http"
	"strconv"
	"sync"
)

// Defaults of the bounds on held requests per merchant (Config).
const (
	// DefaultMaxLongPollsPerMerchant is how many long polls (a poll read
	// with wait) one merchant holds open at once on one API process.
	DefaultMaxLongPollsPerMerchant = 20
	// DefaultMaxListenersPerMerchant is how many listen connections
	// (`webhookd listen`) one merchant holds open at once on one API
	// process.
	DefaultMaxListenersPerMerchant = 10
)

// heldLimit bounds how many requests of one kind that stay open (long
// polls, listen connections) a merchant holds at once, so that one
// merchant cannot take a process's goroutines, connections and wake-ups
// from every other (docs/decisions.md, "A merchant's input", rule 4).
// The count is this process's: each API process holds its own requests
// and their resources, and a merchant's requests spread over N processes
// are bounded by N times max; the per-key request rate bounds how fast
// they come.
type heldLimit struct {
	// what names the requests in the refusal ("long polls").
	what string
	max  int
	// retryAfter is the Retry-After of a refusal, in seconds: about when
	// one of the merchant's held requests may have ended.
	retryAfter int

	mu sync.Mutex
	// held counts each merchant's open requests; a merchant holding none
	// has no entry.
	held map[string]int
}

// newHeldLimit bounds requests of one kind to max per merchant (zero
// takes def).
func newHeldLimit(what string, max, def, retryAfter int) *heldLimit {
	if max <= 0 {
		max = def
	}
	return &heldLimit{what: what, max: max, retryAfter: retryAfter, held: map[string]int{}}
}

// hold takes one of merchantID's places, or answers 429
// rate_limit_exceeded when all are taken; release gives it back.
func (l *heldLimit) hold(merchantID string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[merchantID] >= l.max {
		e := newError(http.StatusTooManyRequests, catRateLimit, "rate_limit_exceeded",
			"Too many "+l.what+" open at once (at most "+strconv.Itoa(l.max)+"); retry after the Retry-After delay, once one has ended.")
		e.RetryAfter = l.retryAfter
		return nil, e
	}
	l.held[merchantID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.held[merchantID]--; l.held[merchantID] == 0 {
				delete(l.held, merchantID)
			}
		})
	}, nil
}
