package oauthtoken

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/keybounds"
)

// Source gets and invalidates one subscription's token.
type Source struct {
	tokens *Tokens
	creds  Credentials
	// tokenKey holds the sealed token and its id (a hash: sealed, id).
	tokenKey string
	// lockKey is held by the one process fetching.
	lockKey string
	// failureKey holds the last failed fetch, for FailureTTL.
	failureKey string
}

// Token is the subscription's current token: the shared one while it is
// fresh, else one fetched by this process or another. A failure is an
// *Error (the token endpoint's, or ctx ending first, which it wraps) or a
// Redis error. A fetch that failed within FailureTTL is the answer
// without asking the endpoint again: the retries of every worker do not
// hammer an endpoint that is down.
func (s *Source) Token(ctx context.Context) (Token, error) { return s.token(ctx, false) }

// TokenAsked is Token for an attempt a person asked for (a redeliver, a
// recover, a test event, an endpoint check): a failure the automatic
// attempts met is not its answer, and the endpoint is asked again, since
// the merchant pressing the button may just have fixed it. A failure of
// an asked-for fetch within FailureTTL still is the answer, to asked-for
// and automatic attempts alike, so that a recover of thousands of
// deliveries asks a failing endpoint once, not once for each. A token
// is shared as ever.
func (s *Source) TokenAsked(ctx context.Context) (Token, error) { return s.token(ctx, true) }

// token is Token, or TokenAsked when asked.
func (s *Source) token(ctx context.Context, asked bool) (Token, error) {
	if tok, found, err := s.lookup(ctx, asked); found {
		return tok, err
	}
	// The shared wait outlives a caller that gives up, so that the others
	// waiting with it in this process still get its result. Asked-for
	// calls wait apart: an automatic one's answer may be the failure they
	// must not take.
	key := s.tokenKey
	if asked {
		key += "|asked"
	}
	wait := context.WithoutCancel(ctx)
	ch := s.tokens.flight.DoChan(key, func() (any, error) {
		ctx, cancel := context.WithTimeout(wait, 2*s.tokens.cfg.LockTTL)
		defer cancel()
		return s.refresh(ctx, asked)
	})
	select {
	case <-ctx.Done():
		// The caller's time ran out while the fetch goes on for the others
		// waiting: a token endpoint too slow for the attempt.
		return Token{}, unanswered(ctx.Err(), "the wait was cancelled")
	case r := <-ch:
		if r.Err != nil {
			return Token{}, r.Err
		}
		return r.Val.(Token), nil
	}
}

// invalidateScript deletes the token only if it is still the one refused:
// of several workers that saw the same 401, the first drops it and the
// others, finding a newer token or none, leave it.
var invalidateScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// Invalidate drops rejected, the token an endpoint answered 401 to, so
// that the next Token call fetches a new one; once, however many workers
// call it with the same token.
func (s *Source) Invalidate(ctx context.Context, rejected Token) error {
	if err := invalidateScript.Run(ctx, s.tokens.cfg.Redis, []string{s.tokenKey}, tokenID(rejected.AccessToken)).Err(); err != nil {
		return fmt.Errorf("invalidate oauth token: %w", err)
	}
	return nil
}

// failure is a failed fetch as kept in Redis, for the workers that waited
// for it and those that come within FailureTTL. It holds no secret.
type failure struct {
	Status int    `json:"status"`
	Code   string `json:"code,omitempty"`
	// Cause is what went wrong in the merchant's words (Error.said).
	Cause string    `json:"cause,omitempty"`
	Until time.Time `json:"until"`
	// Asked is set when the fetch was asked for by a person (TokenAsked):
	// then it answers asked-for calls too.
	Asked bool `json:"asked,omitempty"`
}

// lookup reads the shared token and the last failure: found is set when
// one of them answers (a fresh token, a recent failure: for an asked-for
// call, one of an asked-for fetch) or Redis fails.
func (s *Source) lookup(ctx context.Context, asked bool) (tok Token, found bool, err error) {
	rc := s.tokens.cfg.Redis
	var sealed *redis.StringCmd
	var failed *redis.StringCmd
	_, err = rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		sealed = p.HGet(ctx, s.tokenKey, "sealed")
		failed = p.Get(ctx, s.failureKey)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Token{}, true, fmt.Errorf("read oauth token: %w", err)
	}
	now := s.tokens.cfg.Clock.Now()
	if b, err := sealed.Bytes(); err == nil {
		// A record that does not open (another master key, tampered with)
		// is a miss: the fetch that follows overwrites it.
		if r, err := openRecord(s.tokens.sealer, b, s.tokenKey); err == nil && now.Before(r.RefreshAt) {
			return Token{AccessToken: r.AccessToken, Expiry: r.Expiry}, true, nil
		}
	}
	if b, err := failed.Bytes(); err == nil {
		var f failure
		if json.Unmarshal(b, &f) == nil && now.Before(f.Until) && (f.Asked || !asked) {
			return Token{}, true, &Error{Status: f.Status, Code: f.Code, said: f.Cause}
		}
	}
	return Token{}, false, nil
}

// releaseScript frees the lock only if this process still holds it.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// refresh waits for the token of whichever process holds the lock, or
// takes the lock and fetches it.
func (s *Source) refresh(ctx context.Context, asked bool) (Token, error) {
	cfg := s.tokens.cfg
	owner := rand.Text()
	for {
		if tok, found, err := s.lookup(ctx, asked); found {
			return tok, err
		}
		took, err := cfg.Redis.SetNX(ctx, s.lockKey, owner, cfg.LockTTL).Result()
		if err != nil {
			return Token{}, fmt.Errorf("lock oauth token: %w", err)
		}
		if took {
			defer releaseScript.Run(context.WithoutCancel(ctx), cfg.Redis, []string{s.lockKey}, owner)
			return s.fetchLocked(ctx, asked)
		}
		select {
		case <-ctx.Done():
			return Token{}, &Error{said: "timed out waiting for another worker's token",
				err: fmt.Errorf("waited for another worker's token: %w", ctx.Err())}
		case <-time.After(cfg.PollInterval):
		}
	}
}

// fetchLocked fetches a token while holding the lock and shares the
// outcome, token or failure.
func (s *Source) fetchLocked(ctx context.Context, asked bool) (Token, error) {
	// Another process may have stored a token between the look-up and the
	// lock.
	if tok, found, err := s.lookup(ctx, asked); found {
		return tok, err
	}
	cfg := s.tokens.cfg
	// The fetch ends a fifth of the lock's time before the lock does, so
	// that its outcome is shared before another process may take the lock
	// and ask the endpoint again.
	fetchCtx, cancel := context.WithTimeout(ctx, cfg.LockTTL*4/5)
	defer cancel()
	now := cfg.Clock.Now()
	got, err := s.tokens.endpoint.fetch(fetchCtx, s.creds, now)
	if errors.Is(err, keybounds.ErrKeyNotAccepted) {
		// The stored key is at fault, not the endpoint, which was not
		// asked: nothing to share, and every attempt is told so itself
		// (a shared failure would lose the refusal's kind).
		return Token{}, err
	}
	if err != nil {
		return Token{}, s.shareFailure(ctx, err, now, asked)
	}
	r := record{Key: s.tokenKey, AccessToken: got.accessToken, Expiry: now.Add(got.lifetime),
		RefreshAt: now.Add(got.lifetime - min(cfg.RefreshBefore, got.lifetime/2))}
	sealed, err := r.seal(s.tokens.sealer)
	if err != nil {
		return Token{}, err
	}
	_, err = cfg.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.tokenKey, "sealed", sealed, "id", tokenID(got.accessToken))
		// Redis forgets the token once it has expired; freshness itself
		// is judged by RefreshAt on the injected clock.
		p.PExpire(ctx, s.tokenKey, max(got.lifetime, time.Second))
		p.Del(ctx, s.failureKey)
		return nil
	})
	if err != nil {
		return Token{}, fmt.Errorf("store oauth token: %w", err)
	}
	return Token{AccessToken: r.AccessToken, Expiry: r.Expiry}, nil
}

// shareFailure keeps err for FailureTTL and returns it; asked: the fetch
// was asked for by a person.
func (s *Source) shareFailure(ctx context.Context, err error, now time.Time, asked bool) error {
	f := failure{Until: now.Add(s.tokens.cfg.FailureTTL), Asked: asked}
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	// The merchant's words only: the cause's own text stays in this
	// process's log.
	f.Status, f.Code, f.Cause = e.Status, e.Code, e.said
	b, merr := json.Marshal(f)
	if merr != nil {
		return err
	}
	if serr := s.tokens.cfg.Redis.Set(ctx, s.failureKey, b, max(s.tokens.cfg.FailureTTL, time.Millisecond)).Err(); serr != nil {
		return errors.Join(err, fmt.Errorf("share oauth token failure: %w", serr))
	}
	return err
}
