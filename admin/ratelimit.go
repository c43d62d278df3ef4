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
// across every API instance. Three use it: the per-API-key limit on the
// whole public API, the per-merchant limit on send_test_event, and the
// per-API-key limit on minting portal sessions.
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
// API, per API key: by the key's id, so that the key itself never becomes a
// Redis key. A portal session minted with a key spends that key's budget,
// so that minting sessions never multiplies a key's rate; one the core API
// minted (no key) has a budget of its own, as before, since its sessions
// are the operator's to count. It fails open: a Redis outage should not
// take the whole API down with it, and Postgres is still guarded by its
// pool and by the bound on rows a list reads (store.MaxRowsExamined).
func apiRateLimit(limit redis_rate.Limit) rateLimit {
	return rateLimit{name: "api", limit: limit, failOpen: true,
		owner: func(r *http.Request) string {
			p := principalOf(r.Context())
			switch {
			case p.Session != nil && p.Session.APIKeyID != nil:
				return p.Session.APIKeyID.String()
			case p.Session != nil:
				return "session:" + p.Session.ID.String()
			}
			return p.Key.ID.String()
		}}
}

// defaultPortalSessionsPerMinute is the portal session limit when none is
// configured: ten a minute per key (a burst of ten, then one every six
// seconds) is more than a merchant's staff opening the portal need, and
// bounds the rows a key can add to 14,400 a day.
const defaultPortalSessionsPerMinute = 10

// portalSessionRateLimit is the limit on the sessions an API key mints
// (POST /v1/portal_sessions), one budget per key (zero limit: the
// default). Each session is a row and a credential, so a key must not mint
// them without bound. It fails closed: a refused mint costs a retry, while
// a Redis outage must not lift the bound.
func portalSessionRateLimit(limit redis_rate.Limit) rateLimit {
	if limit.Rate <= 0 {
		limit = redis_rate.PerMinute(defaultPortalSessionsPerMinute)
	}
	return rateLimit{name: "portal_session", limit: limit, failOpen: false,
		owner: func(r *http.Request) string { return principalOf(r.Context()).Key.ID.String() }}
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
// the rate limits, kept in Redis. It is shared by the API's route
// groups: the per-key limit wraps every authenticated public route, the
// per-merchant one the routes that make webhookd call a merchant's URL;
// the mint handler spends the per-key portal session budget itself.
type rateLimiter struct {
	respond responder
	// limiter is nil without Redis: then nothing is limited.
	limiter *redis_rate.Limiter
	// errors counts requests whose rate limit Redis could not check.
	errors *prometheus.CounterVec
	// api is the limit of every authenticated request of the public API;
	// testEvent that of each request that sends a merchant's endpoint
	// something (send_test_event, an endpoint check, a trigger);
	// portalSession that of each portal session a key mints.
	api, testEvent, portalSession rateLimit
}

// newLimiterErrors counts the requests for which Redis could not be asked.
func newLimiterErrors(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhookd_rate_limiter_errors_total",
		Help: "Requests whose rate limit could not be checked (Redis unreachable), by limit; the api limit lets them through, test_event and portal_session refuse them.",
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

// limit spends one unit of l's budget per request (spend) before the
// request goes on; over the budget, or when Redis cannot be asked and l
// fails closed, the request gets spend's error.
func (rl rateLimiter) limit(l rateLimit) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if rl.limiter == nil || l.limit.Rate <= 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := rl.spend(w, r, l); err != nil {
				rl.respond.writeError(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// spend spends one unit of l's budget on r's behalf, for a handler that
// spends it only once the request would do what the budget bounds (a
// portal session is minted only once its body passed its rules), and for
// limit. Over the budget the error is 429 rate_limit_exceeded with
// Retry-After in whole seconds, at least 1; every answer carries the
// RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-11), one list member per limit.
// When Redis cannot be asked, the error is Redis's if l fails closed, and
// nil (the request goes on, logged) if it fails open.
func (rl rateLimiter) spend(w http.ResponseWriter, r *http.Request, l rateLimit) error {
	if rl.limiter == nil || l.limit.Rate <= 0 {
		return nil
	}
	// A Redis that hangs must not hold every request for the client's full
	// timeout before the limit fails open.
	ctx, cancel := context.WithTimeout(r.Context(), limiterTimeout)
	res, err := rl.limiter.Allow(ctx, "webhookd:rl:"+l.name+":"+l.owner(r), l.limit)
	cancel()
	if err != nil {
		rl.errors.WithLabelValues(l.name).Inc()
		if !l.failOpen {
			return fmt.Errorf("%s rate limit: %w", l.name, err)
		}
		rl.respond.logger.WarnContext(r.Context(), "rate limit unchecked, request let through", "limit", l.name,
			"correlation_id", correlationID(r.Context()), "error", err)
		return nil
	}
	setRateLimitFields(w.Header(), l.name, res)
	if res.Allowed == 0 {
		return errRateLimited(wholeSeconds(res.RetryAfter))
	}
	return nil
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
