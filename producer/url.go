package producer

import (
	"crypto/tls"
	"fmt"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// ParseRedisURL reads a Redis URL the way webhookd reads
// WEBHOOKD_REDIS_URL, so that the core API and the engine agree on what a
// URL means: redis://[user:password@]host:port[/db], rediss://… for TLS,
// or unix://[user:password@]/path/to/socket[?db=N].
func ParseRedisURL(rawURL string) (*redis.Options, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("expected a Redis URL such as redis://127.0.0.1:6379/0, rediss://host:6380/0 or unix:///run/redis.sock: %w", err)
	}
	return opt, nil
}

// AsynqRedisOpt is the asynq connection of go-redis options: the same
// server, credentials, database and TLS, so that a go-redis client and the
// asynq clients made from one URL reach the same place.
func AsynqRedisOpt(o *redis.Options) asynq.RedisClientOpt {
	return asynq.RedisClientOpt{Network: o.Network, Addr: o.Addr, Username: o.Username, Password: o.Password,
		DB: o.DB, TLSConfig: o.TLSConfig, PoolSize: o.PoolSize}
}

// Option adjusts the connection NewFromURL makes.
type Option func(*asynq.RedisClientOpt)

// WithTLSConfig replaces the TLS configuration of a rediss:// URL (a
// private CA, a client certificate); with another scheme it turns TLS on.
func WithTLSConfig(c *tls.Config) Option {
	return func(o *asynq.RedisClientOpt) { o.TLSConfig = c }
}

// WithPoolSize bounds the connections to Redis of each of the producer's
// clients (go-redis's default is ten per CPU).
func WithPoolSize(n int) Option {
	return func(o *asynq.RedisClientOpt) { o.PoolSize = n }
}

// NewFromURL returns a Producer on the Redis at rawURL, which takes the
// forms WEBHOOKD_REDIS_URL takes (see ParseRedisURL): give it the engine's
// WEBHOOKD_REDIS_URL. It connects lazily: an unreachable Redis is an
// error of the first Publish, not of NewFromURL.
func NewFromURL(rawURL string, opts ...Option) (*Producer, error) {
	parsed, err := ParseRedisURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	conn := AsynqRedisOpt(parsed)
	for _, o := range opts {
		o(&conn)
	}
	return New(conn), nil
}
