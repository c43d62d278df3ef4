package admin

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
)

// rateLimit is one request budget, kept in Redis by GCRA so that it holds
// across every API instance. Two use it: the per-API-key limit on the whole
// public API, and the per-merchant limit on send_test_event.
type rateLimit struct {
	// name tells the budgets apart in Redis keys, metrics, logs and the
	// RateLimit headers.
	name string
	// limit is the rate and burst; a zero Rate means no limit.
	limit redis_rate.Limit
	// owner names whose budget a request spends.
	owner func(*http.Request) string
	// failOpen lets requests through when Redis cannot be asked.
	failOpen bool
}

// apiRateLimit is the limit on every authenticated request of the public
// API, per API key (or portal session): by the key's id, so that the key itself never becomes a
// Redis key. It fails open: a Redis outage should not take the whole API
// down with it, and Postgres is still guarded by its pool and by the bound
// on rows a list reads (store.MaxRowsExamined).
func apiRateLimit(limit redis_rate.Limit) rateLimit {
	return rateLimit{name: "api", limit: limit, failOpen: true,
		owner: func(r *http.Request) string {
			// A portal session spends its own budget, not the zero key's.
			if p := principalOf(r.Context()); p.Session != nil {
				return "session:" + p.Session.ID.String()
			}
			return principalOf(r.Context()).Key.ID.String()
		}}
}

// testEventRateLimit is the limit on send_test_event, checks and triggers,
// one budget per merchant. It fails
// closed: each test event is a request to a URL the merchant chose, and
// deliveries wait for Redis anyway, so refusing one costs the merchant little
// while letting a flood through would be sent on when Redis is back.
func testEventRateLimit(limit redis_rate.Limit) rateLimit {
	return rateLimit{name: "test_event", limit: limit, failOpen: false,
		owner: func(r *http.Request) string { return principalOf(r.Context()).Merchant.ID }}
}

// rateLimiter is the middleware that spends a request's budget of one of
// the two rate limits, kept in Redis. It is shared by the API's route
// groups: the per-key limit wraps every authenticated public route, the
// per-merchant one the routes that make webhookd call a merchant's URL.
type rateLimiter struct {
	respond responder
	// limiter is nil without Redis: then nothing is limited.
	limiter *redis_rate.Limiter
	// errors counts requests whose rate limit Redis could not check.
	errors *prometheus.CounterVec
	// api is the limit of every authenticated request of the public API;
	// testEvent that of each request that sends a merchant's endpoint
	// something (send_test_event, an endpoint check, a trigger).
	api, testEvent rateLimit
}

// newLimiterErrors counts the requests for which Redis could not be asked.
func newLimiterErrors(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhookd_rate_limiter_errors_total",
		Help: "Requests whose rate limit could not be checked (Redis unreachable), by limit; the api limit lets them through, test_event refuses them.",
	}, []string{"limit"})
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("register rate limiter metrics: %w", err)
	}
	return c, nil
}

// limiterTimeout bounds one question to the limiter's Redis.
const limiterTimeout = 250 * time.Millisecond

// limit spends one unit of l's budget per request. Over the budget the
// answer is 429 rate_limit_exceeded with Retry-After in whole seconds, at
// least 1; every answer carries the RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-11), one list member per limit.
func (rl rateLimiter) limit(l rateLimit) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if rl.limiter == nil || l.limit.Rate <= 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// A Redis that hangs must not hold every request for the
			// client's full timeout before the limit fails open.
			ctx, cancel := context.WithTimeout(r.Context(), limiterTimeout)
			res, err := rl.limiter.Allow(ctx, "webhookd:rl:"+l.name+":"+l.owner(r), l.limit)
			cancel()
			if err != nil {
				rl.errors.WithLabelValues(l.name).Inc()
				if !l.failOpen {
					rl.respond.writeError(w, r, fmt.Errorf("%s rate limit: %w", l.name, err))
					return
				}
				rl.respond.logger.WarnContext(r.Context(), "rate limit unchecked, request let through", "limit", l.name,
					"correlation_id", correlationID(r.Context()), "error", err)
				next.ServeHTTP(w, r)
				return
			}
			setRateLimitFields(w.Header(), l.name, res)
			if res.Allowed == 0 {
				rl.respond.writeError(w, r, errRateLimited(wholeSeconds(res.RetryAfter)))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// setRateLimitFields describes a GCRA budget in the draft's terms: the quota
// is the burst, and its window the time the rate takes to refill it; what is
// left is the burst not spent, back in full after ResetAfter.
func setRateLimitFields(h http.Header, name string, res *redis_rate.Result) {
	l := res.Limit
	window := wholeSeconds(time.Duration(float64(l.Period) * float64(l.Burst) / float64(l.Rate)))
	h.Add("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", name, l.Burst, window))
	h.Add("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", name, res.Remaining, max(0, int(math.Ceil(res.ResetAfter.Seconds())))))
}

// wholeSeconds rounds d up to whole seconds, at least 1 (Retry-After 0
// would invite an immediate retry that fails again).
func wholeSeconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }
