package redisdedup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/receiver"
)

// DefaultStatusPrefix starts every key of a [StatusStore] when
// [StatusStoreConfig.Prefix] is empty.
const DefaultStatusPrefix = "webhook:status:"

// StatusStoreConfig configures a [StatusStore].
type StatusStoreConfig struct {
	// Client is the Redis connection; required.
	Client Client
	// Prefix starts every key; empty means DefaultStatusPrefix.
	Prefix string
	// Retention is how long a status is kept after it was last set; zero
	// means receiver.DefaultRetention, after which webhookd can no longer
	// deliver an event about it.
	Retention time.Duration
}

// validate checks the config without changing it.
func (c StatusStoreConfig) validate() error {
	if c.Client == nil {
		return errors.New("redisdedup: StatusStoreConfig.Client is required")
	}
	if c.Retention != 0 && c.Retention < time.Millisecond {
		return fmt.Errorf("redisdedup: retention %s must be at least 1ms", c.Retention)
	}
	return nil
}

// StatusStore is a [receiver.StatusStore] on Redis, for a [receiver.Guard]
// shared by several replicas: one key per resource,
// "{prefix}{kind}:{id}", holding its last status.
type StatusStore struct {
	cfg StatusStoreConfig
}

var _ receiver.StatusStore = (*StatusStore)(nil)

// NewStatusStore returns a StatusStore for cfg.
func NewStatusStore(cfg StatusStoreConfig) (*StatusStore, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultStatusPrefix
	}
	if cfg.Retention == 0 {
		cfg.Retention = receiver.DefaultRetention
	}
	return &StatusStore{cfg: cfg}, nil
}

// LastStatus implements [receiver.StatusStore].
func (s *StatusStore) LastStatus(ctx context.Context, key string) (string, bool, error) {
	v, err := s.cfg.Client.Get(ctx, s.cfg.Prefix+key).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("redisdedup: last status of %s: %w", key, err)
	}
	return v, true, nil
}

// SetStatus implements [receiver.StatusStore].
func (s *StatusStore) SetStatus(ctx context.Context, key, status string) error {
	if err := s.cfg.Client.Set(ctx, s.cfg.Prefix+key, status, s.cfg.Retention).Err(); err != nil {
		return fmt.Errorf("redisdedup: set status of %s: %w", key, err)
	}
	return nil
}
