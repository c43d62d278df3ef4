package deliver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/keybounds"
	"github.com/webhookd/webhookd/internal/oauthtoken"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// errOAuthToken is an attempt whose bearer token could not be had: the
// subscription's token endpoint failed (its status is the attempt's
// http_status), could not be reached, or was refused by the address check.
const errOAuthToken = "oauth_token"

// maxOAuthSources bounds the token sources kept; past it they are all
// dropped and made again as attempts come (a Source is cheap to make, and
// the tokens themselves live in Redis).
const maxOAuthSources = 10_000

// OAuthConfig is what a sender needs to send the bearer tokens of
// oauth2_client_credentials subscriptions. Unset, such a subscription's
// attempts fail for an internal reason (and are tried again).
type OAuthConfig struct {
	// Redis shares each subscription's token between the processes.
	Redis asynq.RedisConnOpt
	// MasterKey (32 bytes) seals the tokens in Redis.
	MasterKey []byte
}

// EndpointOAuth is the OAuth2 client credentials of an attempt's
// subscription, not yet opened: the sender keeps a token source per
// Version, so that an attempt costs neither a decryption nor a parse.
type EndpointOAuth struct {
	// Version names the subscription and the authentication as stored.
	Version        string
	subscriptionID string
	sealed         []byte
	sealer         *signer.Sealer
}

// EndpointOAuth is the OAuth2 credentials of a leased delivery's
// subscription; nil when it has no oauth2_client_credentials
// authentication. It comes with the lease's row, so it costs no query.
func (c *SecretCache) EndpointOAuth(l store.LeasedDelivery) *EndpointOAuth {
	if l.SealedAuthentication == nil || l.AuthenticationType != subscriptions.AuthenticationOAuth2 {
		return nil
	}
	sum := sha256.Sum256(l.SealedAuthentication)
	return &EndpointOAuth{Version: l.SubscriptionID.String() + "/" + hex.EncodeToString(sum[:16]),
		subscriptionID: l.SubscriptionID.String(), sealed: l.SealedAuthentication, sealer: c.sealer}
}

// bearerTokens are a sender's token sources, one per subscription's
// credentials, on one oauthtoken.Tokens built at the first use (a process
// whose subscriptions use none opens no Redis client for them). Tokens
// reach their endpoints through the sender's shared client: the same
// address check, egress proxy and no redirects as deliveries.
type bearerTokens struct {
	tokens func() (*oauthtoken.Tokens, error)

	mu      sync.Mutex
	sources map[string]*oauthtoken.Source
	// redis is the tokens' client, once made.
	redis redis.UniversalClient
}

// newBearerTokens builds the sources of cfg, fetching through client.
func newBearerTokens(cfg OAuthConfig, client *http.Client, clk clock.Clock) *bearerTokens {
	b := &bearerTokens{sources: make(map[string]*oauthtoken.Source)}
	b.tokens = sync.OnceValues(func() (*oauthtoken.Tokens, error) {
		if cfg.Redis == nil || len(cfg.MasterKey) == 0 {
			return nil, errors.New("oauth2 endpoints: no Redis or master key configured for their tokens")
		}
		rc, ok := cfg.Redis.MakeRedisClient().(redis.UniversalClient)
		if !ok {
			return nil, errors.New("oauth2 endpoints: Redis options make no go-redis client")
		}
		b.mu.Lock()
		b.redis = rc
		b.mu.Unlock()
		return oauthtoken.New(oauthtoken.Config{Redis: rc, HTTP: client, MasterKey: cfg.MasterKey, Clock: clk})
	})
	return b
}

// close closes the tokens' Redis client, if one was made.
func (b *bearerTokens) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.redis != nil {
		_ = b.redis.Close()
		b.redis = nil
	}
}

// source is the token source of e's credentials, made (e opened) the
// first time.
func (b *bearerTokens) source(e *EndpointOAuth) (*oauthtoken.Source, error) {
	b.mu.Lock()
	src, ok := b.sources[e.Version]
	b.mu.Unlock()
	if ok {
		return src, nil
	}
	tokens, err := b.tokens()
	if err != nil {
		return nil, err
	}
	a, err := subscriptions.OpenAuthentication(e.sealer, e.sealed)
	if err != nil {
		return nil, fmt.Errorf("oauth2 credentials %s: %w", e.Version, err)
	}
	creds, err := a.OAuth2Credentials()
	if err != nil {
		return nil, fmt.Errorf("oauth2 credentials %s: %w", e.Version, err)
	}
	src = tokens.Source(e.subscriptionID, creds)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.sources) >= maxOAuthSources {
		clear(b.sources)
	}
	b.sources[e.Version] = src
	return src, nil
}

// exchangeBearer is exchange with the subscription's bearer token in the
// Authorization header, set after the subscription's own headers so that
// none of them can replace it. An endpoint that answers 401 gets the
// request once more, in the same attempt, with a token fetched anew (the
// refused one dropped for every worker); a token that cannot be had is the
// attempt's failure, oauth_token, with the token endpoint's status. All of
// it takes at most the delivery timeout. An error is internal (the
// credentials could not be opened): nothing was sent.
func (s *Sender) exchangeBearer(ctx context.Context, client *http.Client, p prepared) (Result, error) {
	src, err := s.bearer.source(p.OAuth)
	if err != nil {
		return Result{}, err
	}
	// The whole of it, tokens and both requests, within one exchange's
	// time, so that the attempt ends within its lease like any other.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	started := s.clock.Now()
	var first *Result
	for {
		token := src.Token
		if askedFor(ctx) {
			token = src.TokenAsked
		}
		tok, err := token(ctx)
		if err != nil {
			return s.tokenFailed(started, err), nil
		}
		with := p
		with.Ordering = p.Ordering.Clone()
		if with.Ordering == nil {
			with.Ordering = http.Header{}
		}
		tok.SetAuthHeader(with.Ordering)
		res := s.exchange(ctx, client, with)
		if first != nil {
			// One attempt: it began with the first request.
			res.Started, res.Duration = first.Started, first.Duration+res.Duration
			return res, nil
		}
		if res.HTTPStatus == nil || *res.HTTPStatus != http.StatusUnauthorized {
			return res, nil
		}
		if err := src.Invalidate(context.WithoutCancel(ctx), tok); err != nil {
			// Without dropping it the same token would come back.
			return res, nil
		}
		first = &res
	}
}

// askedKey marks the context of an attempt a person asked for.
type askedKey struct{}

// asking is ctx marked as an attempt a person asked for: a merchant's
// redeliver, recover or test event, an endpoint check. Its bearer token
// is asked afresh of an endpoint whose last failure the automatic
// attempts met (oauthtoken.Source.TokenAsked): the merchant may just have
// fixed it.
func asking(ctx context.Context) context.Context { return context.WithValue(ctx, askedKey{}, true) }

// askedFor tells an attempt a person asked for (asking).
func askedFor(ctx context.Context) bool { return ctx.Value(askedKey{}) != nil }

// explicitly is ctx marked asking when the attempt at of leased is one a
// person asked for: a manual attempt (redeliver, recover, the portal's
// Resend) or the first attempt of a test event (send_test_event).
func explicitly(ctx context.Context, at queue.Attempt, leased store.LeasedDelivery) context.Context {
	if at.Trigger == store.TriggerManual || leased.Test && at.Number == 1 {
		return asking(ctx)
	}
	return ctx
}

// tokenFailed is the result of an attempt that got no token: oauth_token,
// the token endpoint's status as the attempt's http_status (none when it
// gave none), and what went wrong as its body in the merchant's words
// (oauthtoken.Error: the endpoint's status and error code, or the kind of
// failure; no secret, no address of this server's). Any other failure
// (Redis) is this server's own and is said so; its text, like the token
// endpoint's raw cause, is for the log (Result.cause).
func (s *Sender) tokenFailed(started time.Time, err error) Result {
	if errors.Is(err, keybounds.ErrKeyNotAccepted) {
		// A private_key_jwt key stored by an older build, beyond the
		// bounds: never used, and not the token endpoint's failure.
		return s.refusedAuthentication(started, err)
	}
	code := errOAuthToken
	res := Result{Started: started, Finished: s.clock.Now(), ErrCode: &code, outcome: metrics.OutcomeNetworkError, cause: err}
	res.Duration = res.Finished.Sub(started)
	if status := oauthtoken.StatusOf(err); status != 0 {
		res.HTTPStatus, res.outcome = &status, metrics.OutcomeHTTPError
	}
	why := "this server could not get the token for an internal reason; the attempt is made again"
	var te *oauthtoken.Error
	if errors.As(err, &te) {
		why = te.Error()
		if cause := te.Unwrap(); cause != nil {
			res.cause = cause
		}
	}
	res.Body = printable([]byte(truncate(code+": "+why, maxResponseBody)))
	return res
}
