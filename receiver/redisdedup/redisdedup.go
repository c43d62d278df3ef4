// Package redisdedup is a [receiver.Deduplicator] on Redis, shared by every
// replica of a merchant's endpoint. Each event id is one key:
//
//	SET {prefix}{id} {token} NX PX {lease}    claim, while the handler runs
//	SET {prefix}{id} done PX {retention}      complete
//	DEL {prefix}{id} if it still holds token  release (a Lua script)
//
// Redis expires the keys itself. Run it with a noeviction policy (or one
// that evicts only keys with a TTL that you can afford to lose): an evicted
// done key lets a duplicate through.
package redisdedup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/receiver"
)

// DefaultPrefix starts every key when [Config.Prefix] is empty.
const DefaultPrefix = "webhook:id:"

// doneValue is a done key's value; claim tokens are hex, never this.
const doneValue = "done"

// claimAttempts bounds the loop in Claim that retries when the key expired
// between the SET NX that found it and the GET that reads it.
const claimAttempts = 3

// Client is the part of go-redis the Deduplicator uses; *redis.Client,
// *redis.ClusterClient and *redis.Ring provide it.
type Client interface {
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
	Get(ctx context.Context, key string) *redis.StringCmd
	redis.Scripter
}

// Config configures a [Deduplicator].
type Config struct {
	// Client is the Redis connection; required.
	Client Client
	// Prefix starts every key; empty means DefaultPrefix. Give each
	// endpoint that must not share ids its own prefix.
	Prefix string
	// Lease is how long a claim holds an id; zero means receiver.DefaultLease.
	Lease time.Duration
	// Retention is how long a done id is kept; zero means
	// receiver.DefaultRetention.
	Retention time.Duration
}

// validate checks the config without changing it.
func (c Config) validate() error {
	if c.Client == nil {
		return errors.New("redisdedup: Config.Client is required")
	}
	// PX takes whole milliseconds; less would round to no expiry.
	if (c.Lease != 0 && c.Lease < time.Millisecond) || (c.Retention != 0 && c.Retention < time.Millisecond) {
		return fmt.Errorf("redisdedup: lease %s and retention %s must be at least 1ms", c.Lease, c.Retention)
	}
	return nil
}

// Deduplicator is a [receiver.Deduplicator] on Redis, safe for concurrent
// use.
type Deduplicator struct {
	cfg     Config
	release *redis.Script
}

var _ receiver.Deduplicator = (*Deduplicator)(nil)

// releaseScript deletes the key only while it holds the caller's token, so
// that a holder whose lease ran out cannot free a newer holder's claim.
const releaseScript = `
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`

// New returns a Deduplicator for cfg.
func New(cfg Config) (*Deduplicator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Lease == 0 {
		cfg.Lease = receiver.DefaultLease
	}
	if cfg.Retention == 0 {
		cfg.Retention = receiver.DefaultRetention
	}
	return &Deduplicator{cfg: cfg, release: redis.NewScript(releaseScript)}, nil
}

// Claim implements [receiver.Deduplicator].
func (d *Deduplicator) Claim(ctx context.Context, id string) (receiver.Claim, error) {
	key := d.cfg.Prefix + id
	token := receiver.NewClaimToken()
	for range claimAttempts {
		ok, err := d.cfg.Client.SetNX(ctx, key, token, d.cfg.Lease).Result()
		if err != nil {
			return receiver.Claim{}, fmt.Errorf("redisdedup: claim %s: %w", id, err)
		}
		if ok {
			return receiver.Claim{ID: id, Token: token, State: receiver.Claimed}, nil
		}
		v, err := d.cfg.Client.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			continue // expired or released since the SET: try again
		}
		if err != nil {
			return receiver.Claim{}, fmt.Errorf("redisdedup: read %s: %w", id, err)
		}
		if v == doneValue {
			return receiver.Claim{ID: id, State: receiver.Done}, nil
		}
		return receiver.Claim{ID: id, State: receiver.InProgress}, nil
	}
	// The key keeps appearing and vanishing: other deliveries are busy
	// with it, so this one is as good as in progress.
	return receiver.Claim{ID: id, State: receiver.InProgress}, nil
}

// Complete implements [receiver.Deduplicator]. It marks the id done even
// if the claim ran out meanwhile: the handler did succeed.
func (d *Deduplicator) Complete(ctx context.Context, c receiver.Claim) error {
	if err := d.cfg.Client.Set(ctx, d.cfg.Prefix+c.ID, doneValue, d.cfg.Retention).Err(); err != nil {
		return fmt.Errorf("redisdedup: complete %s: %w", c.ID, err)
	}
	return nil
}

// Release implements [receiver.Deduplicator].
func (d *Deduplicator) Release(ctx context.Context, c receiver.Claim) error {
	if c.Token == "" {
		return nil
	}
	if err := d.release.Run(ctx, d.cfg.Client, []string{d.cfg.Prefix + c.ID}, c.Token).Err(); err != nil {
		return fmt.Errorf("redisdedup: release %s: %w", c.ID, err)
	}
	return nil
}
