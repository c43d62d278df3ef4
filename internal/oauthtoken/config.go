package oauthtoken

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/signer"
)

// Config is what Tokens needs.
type Config struct {
	// Redis holds the tokens every worker process shares (required).
	Redis redis.UniversalClient
	// HTTP reaches token endpoints (required): the engine's delivery
	// client, SSRF-guarded and egress-proxied, since a token URL is an
	// address a merchant chose just like a target URL.
	HTTP *http.Client
	// MasterKey (32 bytes) seals the tokens kept in Redis and keys the
	// credentials' fingerprints in key names (required).
	MasterKey []byte
	// Clock judges when a token is due; nil is the system clock.
	Clock clock.Clock
	// RefreshBefore is how long before its expiry a token is replaced
	// (30 s; at most half a token's lifetime), so that a token outlives
	// the delivery it is sent with.
	RefreshBefore time.Duration
	// LockTTL bounds the lock the fetching process holds, and four fifths
	// of it the fetch (10 s): a process that dies holding the lock stalls
	// the others no longer.
	LockTTL time.Duration
	// PollInterval is how often a process waiting for another's token
	// looks for it (25 ms).
	PollInterval time.Duration
	// FailureTTL is how long a failed fetch is answered to every worker
	// without asking the endpoint again (5 s).
	FailureTTL time.Duration
	// UnknownLifetime is how long a token is kept whose response named no
	// expires_in (5 min).
	UnknownLifetime time.Duration
	// AssertionLifetime is how long a private_key_jwt assertion is valid
	// (60 s).
	AssertionLifetime time.Duration
}

// withDefaults is c with every unset duration at its default.
func (c Config) withDefaults() Config {
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	set(&c.RefreshBefore, 30*time.Second)
	set(&c.LockTTL, 10*time.Second)
	set(&c.PollInterval, 25*time.Millisecond)
	set(&c.FailureTTL, 5*time.Second)
	set(&c.UnknownLifetime, 5*time.Minute)
	set(&c.AssertionLifetime, time.Minute)
	c.Clock = clock.Or(c.Clock)
	return c
}

func (c Config) validate() error {
	switch {
	case c.Redis == nil:
		return errors.New("oauthtoken: Redis is required")
	case c.HTTP == nil:
		return errors.New("oauthtoken: HTTP is required")
	case len(c.MasterKey) != signer.MasterKeySize:
		return fmt.Errorf("oauthtoken: MasterKey must be %d bytes", signer.MasterKeySize)
	case c.RefreshBefore < 0 || c.LockTTL < 0 || c.PollInterval < 0 || c.FailureTTL < 0 ||
		c.UnknownLifetime < 0 || c.AssertionLifetime < 0:
		return errors.New("oauthtoken: durations cannot be negative")
	}
	return nil
}
