package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/sessions"
	"github.com/webhookd/webhookd/internal/store"
)

// principalKeys is what authentication reads of the database's API keys,
// on every request: the key a credential hashes to, and the database's
// clock that a key's expiry is judged by.
type principalKeys interface {
	APIKeyByHash(ctx context.Context, hash []byte) (store.APIKey, store.Merchant, error)
	Now() time.Time
}

// principalSessions is what authentication reads of the database's portal
// sessions: the session a token hashes to.
type principalSessions interface {
	PortalSessionByHash(ctx context.Context, hash []byte, now time.Time) (store.PortalSession, store.Merchant, error)
}

// authenticator is the middleware that tells who sent a request (an API
// key or a portal session) and what it may do. It is separate from the
// request rules because it reads the database on every request.
type authenticator struct {
	respond  responder
	keys     principalKeys
	sessions principalSessions
	// environment is "sandbox" or "production"; credentials of the other
	// one are 401.
	environment string
	// keyUsage notes each key's last use; nil records none.
	keyUsage *merchants.KeyUsage
	// versions echoes the merchant's pinned version once it is known.
	versions Versions
	clock    clock.Clock
}

// principal is the authenticated caller: an API key, or a portal session
// (then Session is set and Key is zero). Capabilities are what it may do:
// those the key's scopes grant, or the session's own (for a session a key
// minted, those of them the key's scopes still grant).
type principal struct {
	Key          store.APIKey
	Session      *store.PortalSession
	Merchant     store.Merchant
	Capabilities []string
}

// principalOf is the caller that authenticate put in ctx.
func principalOf(ctx context.Context) principal {
	p, _ := ctx.Value(keyPrincipal).(principal)
	return p
}

// apiVersion is the version that applies to the request: the api-version
// header, else the merchant's pinned version (spec 9.2).
func apiVersion(ctx context.Context) string {
	if v, ok := ctx.Value(keyVersion).(string); ok {
		return v
	}
	return principalOf(ctx).Merchant.APIVersion
}

// keyReader extracts the API key from a request.
type keyReader func(*http.Request) string

// bearerKey reads Authorization: Bearer <key>.
func bearerKey(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return ""
	}
	return strings.TrimSpace(h[7:])
}

// serviceKey reads the legacy surface's X-Service-Api-Key.
func serviceKey(r *http.Request) string { return strings.TrimSpace(r.Header.Get("X-Service-Api-Key")) }

// authenticate resolves the API key, or on /v1 a portal session token,
// to a merchant and what the caller may do. A key of the other
// environment, revoked or expired, a session expired, revoked or of the
// other environment, unknown, or absent is 401 (spec 5.5).
func (a authenticator) authenticate(read keyReader) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := read(r)
			var p principal
			var err error
			switch {
			case sessions.IsToken(key) && !isLegacy(r.Context()):
				p, err = a.sessionPrincipal(r.Context(), key)
			case key != "" && strings.HasPrefix(key, merchants.KeyPrefix(a.environment)):
				p, err = a.keyPrincipal(r.Context(), key)
			default:
				err = errAuthentication
			}
			if err != nil {
				a.respond.writeError(w, r, err)
				return
			}
			ctx := context.WithValue(r.Context(), keyPrincipal, p)
			if !isLegacy(ctx) {
				a.versions.setHeaders(w, apiVersion(ctx))
			}
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// keyPrincipal is the caller holding an API key.
func (a authenticator) keyPrincipal(ctx context.Context, key string) (principal, error) {
	k, m, err := a.keys.APIKeyByHash(ctx, store.HashAPIKey(key))
	if errors.Is(err, store.ErrNotFound) || err == nil && k.Environment != a.environment {
		return principal{}, errAuthentication
	}
	if err != nil {
		return principal{}, err
	}
	// Read from Postgres on every request, so that a revoked or expired
	// key is refused at once by every process.
	if !merchants.KeyUsable(k, a.keys.Now()) {
		return principal{}, errAuthentication
	}
	a.keyUsage.Seen(k.ID)
	return principal{Key: k, Merchant: m, Capabilities: sessions.FromScopes(k.Scopes)}, nil
}

// sessionPrincipal is the caller holding a live portal session token.
func (a authenticator) sessionPrincipal(ctx context.Context, token string) (principal, error) {
	p, m, err := a.sessions.PortalSessionByHash(ctx, store.HashAPIKey(token), a.clock.Now())
	if errors.Is(err, store.ErrNotFound) || err == nil && p.Environment != a.environment {
		return principal{}, errSessionEnded
	}
	if err != nil {
		return principal{}, err
	}
	caps := p.Capabilities
	if p.APIKeyID != nil {
		// The key's scopes as they are now: a session never does more
		// than the key that minted it may.
		caps = sessions.Within(caps, p.KeyScopes)
	}
	return principal{Session: &p, Merchant: m, Capabilities: caps}, nil
}

// The scopes of webhookd's routes (see merchants.Scopes).
const (
	ScopeRead  = merchants.ScopeRead
	ScopeWrite = merchants.ScopeWrite
)

// requireCapability answers 403 insufficient_scope when the caller lacks
// capability c. Each /v1 route states the one capability it needs; for an
// API key that is the scope granting it (sessions.Scope), so a key's
// refusal names the scope and a session's the capability.
func (a authenticator) requireCapability(c string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := principalOf(r.Context())
			if !slices.Contains(p.Capabilities, c) {
				if p.Session != nil {
					a.respond.writeError(w, r, errMissingCapability(c))
					return
				}
				a.respond.writeError(w, r, errInsufficientScope(sessions.Scope(c)))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// requireScope answers 403 insufficient_scope unless the caller is an API
// key holding scope: a portal session never passes, whatever its
// capabilities (a session cannot mint sessions).
func (a authenticator) requireScope(scope string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := principalOf(r.Context())
			if p.Session != nil || !slices.Contains(p.Key.Scopes, scope) {
				a.respond.writeError(w, r, errInsufficientScope(scope))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
