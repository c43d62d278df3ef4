package admin

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/clock"
)

// Defaults of the bounds on held requests per merchant (Config).
const (
	// DefaultMaxLongPollsPerMerchant is how many long polls (a poll read
	// with wait) one merchant holds open at once.
	DefaultMaxLongPollsPerMerchant = 20
	// DefaultMaxListenersPerMerchant is how many listen connections
	// (`webhookd listen`) one merchant holds open at once.
	DefaultMaxListenersPerMerchant = 10
)

// heldTimeout bounds one question to Redis about a merchant's places.
const heldTimeout = 250 * time.Millisecond

// holdScript takes a place in a merchant's sorted set of held requests
// (member: the request, score: when its place lapses, in ms), after
// dropping the places of requests whose process went away without giving
// them back. KEYS[1] the set; ARGV now, lapse, max, member, the set's TTL
// (ms). 1 taken, 0 all taken.
var holdScript = redis.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1`)

// heldLimit bounds how many requests of one kind that stay open (long
// polls, listen connections) a merchant holds at once, so that one
// merchant cannot take the goroutines, connections and wake-ups of the API
// processes from every other (docs/decisions.md, "A merchant's input",
// rule 4).
//
// The places are counted in Redis, across every API process: one sorted
// set per merchant and kind, each place lapsing at a time its request
// pushes on while it lasts (renew), so that a process that dies gives its
// places back within a lease. When Redis cannot be asked the bound is
// this process's own count, which is always kept: a Redis away must not
// refuse every long poll, nor let one merchant take a process.
type heldLimit struct {
	// name tells the kinds apart in Redis keys; what names the requests
	// in the refusal ("long polls").
	name, what string
	max        int
	// retryAfter is the Retry-After of a refusal, in seconds: about when
	// one of the merchant's held requests may have ended.
	retryAfter int
	// lease is how long a place lasts unless renewed.
	lease time.Duration
	// redis is nil in tests without one: then the count is this
	// process's only.
	redis  redis.UniversalClient
	clock  clock.Clock
	logger *slog.Logger

	mu sync.Mutex
	// held counts each merchant's open requests on this process; a
	// merchant holding none has no entry.
	held map[string]int
}

// heldPlace is one request's place; release gives it back.
type heldPlace struct {
	limit      *heldLimit
	merchantID string
	member     string
	once       sync.Once
}

// hold takes one of merchantID's places, or answers 429
// rate_limit_exceeded when all are taken.
func (l *heldLimit) hold(ctx context.Context, merchantID string) (*heldPlace, error) {
	l.mu.Lock()
	if l.held[merchantID] >= l.max {
		l.mu.Unlock()
		return nil, l.refusal()
	}
	l.held[merchantID]++
	l.mu.Unlock()
	p := &heldPlace{limit: l, merchantID: merchantID, member: uuid.NewString()}
	if l.redis == nil {
		return p, nil
	}
	now := l.clock.Now()
	rctx, cancel := context.WithTimeout(ctx, heldTimeout)
	defer cancel()
	taken, err := holdScript.Run(rctx, l.redis, []string{l.key(merchantID)}, now.UnixMilli(), now.Add(l.lease).UnixMilli(),
		l.max, p.member, (2 * l.lease).Milliseconds()).Int()
	switch {
	case err != nil:
		l.logger.WarnContext(ctx, "held requests: Redis not asked; this process's count bounds them", "limit", l.name,
			"correlation_id", correlationID(ctx), "error", err)
	case taken == 0:
		l.forget(merchantID)
		return nil, l.refusal()
	}
	return p, nil
}

// key is the Redis set of merchantID's places of this kind.
func (l *heldLimit) key(merchantID string) string {
	return "webhookd:held:" + l.name + ":" + merchantID
}

func (l *heldLimit) refusal() *Error {
	e := newError(http.StatusTooManyRequests, catRateLimit, "rate_limit_exceeded",
		"Too many "+l.what+" open at once (at most "+strconv.Itoa(l.max)+"); retry after the Retry-After delay, once one has ended.")
	e.RetryAfter = l.retryAfter
	return e
}

// forget gives back a place in this process's count.
func (l *heldLimit) forget(merchantID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[merchantID]--; l.held[merchantID] <= 0 {
		delete(l.held, merchantID)
	}
}

// renew pushes the place's lapse one lease on, for a request that lasts
// longer than one (a listen connection, at each heartbeat).
func (p *heldPlace) renew(ctx context.Context) error {
	l := p.limit
	if l.redis == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, heldTimeout)
	defer cancel()
	return l.redis.ZAddXX(rctx, l.key(p.merchantID), redis.Z{Score: float64(l.clock.Now().Add(l.lease).UnixMilli()),
		Member: p.member}).Err()
}

// release gives the place back, once, even when the request's context has
// ended (as it has when its client went away).
func (p *heldPlace) release() {
	p.once.Do(func() {
		l := p.limit
		l.forget(p.merchantID)
		if l.redis == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), heldTimeout)
		defer cancel()
		if err := l.redis.ZRem(ctx, l.key(p.merchantID), p.member).Err(); err != nil {
			// Its lease gives it back.
			l.logger.Warn("held requests: give a place back", "limit", l.name, "error", err)
		}
	})
}

// newHeldLimit bounds requests of one kind (name in Redis keys, what in
// refusals) to max per merchant (zero or less: def), each place lasting
// lease unless renewed.
func newHeldLimit(name, what string, max, def, retryAfter int, lease time.Duration, rdb redis.UniversalClient,
	clk clock.Clock, logger *slog.Logger) *heldLimit {
	if max <= 0 {
		max = def
	}
	return &heldLimit{name: name, what: what, max: max, retryAfter: retryAfter, lease: lease, redis: rdb, clock: clk,
		logger: logger, held: map[string]int{}}
}
