package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/sessions"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// correlate gives every request a correlation id, sent back as the
// Correlation-Id header and carried by every log line and error body.
func (s *Server) correlate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := uuid.NewString()
		w.Header().Set("Correlation-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyCorrelation, id)))
	})
}

// requireHTTPS refuses plain HTTP unless the listener is loopback (then
// RequireHTTPS is false) or a trusted proxy says the client used HTTPS.
func (s *Server) requireHTTPS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.RequireHTTPS || r.TLS != nil || s.fromTrustedProxy(r) && r.Header.Get("X-Forwarded-Proto") == "https" {
			next.ServeHTTP(w, r)
			return
		}
		s.writeError(w, r, errHTTPSRequired)
	})
}

func (s *Server) fromTrustedProxy(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(s.cfg.TrustedProxies, func(p netip.Prefix) bool { return p.Contains(ip.Unmap()) })
}

// limitBody reads the whole body once, bounded by MaxBodyBytes, so that the
// idempotency hash and the handler see the same bytes.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				s.writeError(w, r, errPayloadTooLarge)
				return
			}
			s.writeError(w, r, errValidation("", "The request body could not be read."))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyBody, body)))
	})
}

// requestedVersion validates the api-version header (spec 9.3) and echoes a
// version on every /v1 answer, errors included. Until the merchant is known
// the echo is the requested or the latest version.
func (s *Server) requestedVersion(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requested := r.Header.Get("api-version")
		if requested == "" {
			s.setVersionHeaders(w, s.cfg.Versions.Latest())
			next.ServeHTTP(w, r)
			return
		}
		if !s.cfg.Versions.Usable(requested, s.cfg.Now()) {
			s.setVersionHeaders(w, s.cfg.Versions.Latest())
			s.writeError(w, r, errAPIVersion("Unknown or unsupported api-version "+invalid.Quote(requested)+"; see GET /v1/api_versions."))
			return
		}
		s.setVersionHeaders(w, requested)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyVersion, requested)))
	})
}

// principal is the authenticated caller: an API key, or a portal session
// (then Session is set and Key is zero). Capabilities are what it may do:
// the session's own, or those the key's scopes grant.
type principal struct {
	Key          store.APIKey
	Session      *store.PortalSession
	Merchant     store.Merchant
	Capabilities []string
}

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

func bearerKey(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return ""
	}
	return strings.TrimSpace(h[7:])
}

func serviceKey(r *http.Request) string { return strings.TrimSpace(r.Header.Get("X-Service-Api-Key")) }

// authenticate resolves the API key, or on /v1 a portal session token,
// to a merchant and what the caller may do. A key of the other
// environment, revoked or expired, a session expired, revoked or of the
// other environment, unknown, or absent is 401 (spec 5.5).
func (s *Server) authenticate(read keyReader) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := read(r)
			var p principal
			var err error
			switch {
			case sessions.IsToken(key) && !isLegacy(r.Context()):
				p, err = s.sessionPrincipal(r.Context(), key)
			case key != "" && strings.HasPrefix(key, merchants.KeyPrefix(s.cfg.Environment)):
				p, err = s.keyPrincipal(r.Context(), key)
			default:
				err = errAuthentication
			}
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			ctx := context.WithValue(r.Context(), keyPrincipal, p)
			if !isLegacy(ctx) {
				s.setVersionHeaders(w, apiVersion(ctx))
			}
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// keyPrincipal is the caller holding an API key.
func (s *Server) keyPrincipal(ctx context.Context, key string) (principal, error) {
	k, m, err := s.store.APIKeyByHash(ctx, store.HashAPIKey(key))
	if errors.Is(err, store.ErrNotFound) || err == nil && k.Environment != s.cfg.Environment {
		return principal{}, errAuthentication
	}
	if err != nil {
		return principal{}, err
	}
	// Read from Postgres on every request, so that a revoked or expired
	// key is refused at once by every process.
	if !merchants.KeyUsable(k, s.store.Now()) {
		return principal{}, errAuthentication
	}
	s.cfg.KeyUsage.Seen(k.ID)
	return principal{Key: k, Merchant: m, Capabilities: sessions.FromScopes(k.Scopes)}, nil
}

// sessionPrincipal is the caller holding a live portal session token.
func (s *Server) sessionPrincipal(ctx context.Context, token string) (principal, error) {
	p, m, err := s.store.PortalSessionByHash(ctx, store.HashAPIKey(token), s.cfg.Now())
	if errors.Is(err, store.ErrNotFound) || err == nil && p.Environment != s.cfg.Environment {
		return principal{}, errSessionEnded
	}
	if err != nil {
		return principal{}, err
	}
	return principal{Session: &p, Merchant: m, Capabilities: p.Capabilities}, nil
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
func (s *Server) requireCapability(c string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := principalOf(r.Context())
			if !slices.Contains(p.Capabilities, c) {
				if p.Session != nil {
					s.writeError(w, r, errMissingCapability(c))
					return
				}
				s.writeError(w, r, errInsufficientScope(sessions.Scope(c)))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// requireScope answers 403 insufficient_scope unless the caller is an API
// key holding scope: a portal session never passes, whatever its
// capabilities (a session cannot mint sessions).
func (s *Server) requireScope(scope string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := principalOf(r.Context())
			if p.Session != nil || !slices.Contains(p.Key.Scopes, scope) {
				s.writeError(w, r, errInsufficientScope(scope))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func markLegacy(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyLegacy, true)))
	})
}

// requireIngestToken guards the internal routes; with no token configured
// it refuses everything.
func (s *Server) requireIngestToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := bearerKey(r)
		want := s.cfg.IngestToken
		if want == "" {
			s.writeError(w, r, errIngestTokenUnset)
			return
		}
		if got == "" || subtle.ConstantTimeCompare(hashToken(got), hashToken(want)) != 1 {
			s.writeError(w, r, errIngestToken)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hashToken makes the compared values the same length, so that the
// comparison's time says nothing about the token's length.
func hashToken(t string) []byte {
	h := sha256.Sum256([]byte(t))
	return h[:]
}

// idempotencyLock is how long a claimed key blocks concurrent requests if
// its holder dies before answering.
const idempotencyLock = time.Minute

// maxIdempotencyKey is spec 8's limit, in characters.
const maxIdempotencyKey = 255

// checkIdempotencyKey refuses a key that a text column cannot hold (not
// UTF-8, which a header may well be, or holding a NUL, which net/http
// refuses before any handler but another server might not) or longer than
// spec 8's 255 characters: runes, not bytes, so that 255 é is a valid key.
func checkIdempotencyKey(key string) error {
	if !utf8.ValidString(key) || strings.ContainsRune(key, 0) {
		return errInvalid("Idempotency-Key", "Idempotency-Key must be UTF-8 text without NUL.")
	}
	if utf8.RuneCountInString(key) > maxIdempotencyKey {
		return errInvalid("Idempotency-Key", fmt.Sprintf("Idempotency-Key must be at most %d characters.", maxIdempotencyKey))
	}
	return nil
}

// idempotent applies spec 4.4 to POST requests: required on the Banking
// surface, optional on the legacy one. Only 2xx answers are stored.
func (s *Server) idempotent(required bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				next.ServeHTTP(w, r)
				return
			}
			key := r.Header.Get("Idempotency-Key")
			if key == "" {
				if required {
					s.writeError(w, r, errKeyRequired)
					return
				}
				next.ServeHTTP(w, r)
				return
			}
			if err := checkIdempotencyKey(key); err != nil {
				s.writeError(w, r, err)
				return
			}
			merchant := principalOf(r.Context()).Merchant.ID
			h := sha256.New()
			h.Write([]byte(r.Method + " " + r.URL.Path + "\n"))
			h.Write(requestBody(r))
			outcome, stored, err := s.store.ClaimIdempotencyKey(r.Context(), merchant, key, h.Sum(nil), idempotencyLock)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			switch outcome {
			case store.IdempotencyMismatch:
				s.writeError(w, r, errKeyReused)
				return
			case store.IdempotencyInProgress:
				s.writeError(w, r, errInProgress)
				return
			case store.IdempotencyReplay:
				body, err := s.openCachedAnswer(stored.Body)
				if err != nil {
					s.writeError(w, r, err)
					return
				}
				for k, v := range stored.Header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Idempotent-Replayed", "true")
				w.WriteHeader(stored.Status)
				_, _ = w.Write(body)
				return
			}
			rec := &recorder{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(rec, r)
			// The key must be settled even if the client went away.
			ctx := context.WithoutCancel(r.Context())
			if rec.status >= 200 && rec.status < 300 {
				var sealed []byte
				if sealed, err = s.sealCachedAnswer(rec.body.Bytes()); err == nil {
					err = s.store.CompleteIdempotencyKey(ctx, merchant, key, store.StoredResponse{
						Status: rec.status, Header: map[string]string{"Content-Type": w.Header().Get("Content-Type")}, Body: sealed,
					})
				}
			} else {
				err = s.store.ReleaseIdempotencyKey(ctx, merchant, key)
			}
			if err != nil {
				s.logger.ErrorContext(ctx, "settle idempotency key", "correlation_id", correlationID(ctx), "error", err)
			}
		})
	}
}

// sealCachedAnswer encrypts an answer before it is cached for 30 days:
// the answers of create and rotate_secret carry a signing secret, which
// must not sit in the database in clear (secrets are sealed at rest).
func (s *Server) sealCachedAnswer(body []byte) ([]byte, error) {
	sealer, err := signer.NewSealer(s.cfg.MasterKey)
	if err != nil {
		return nil, fmt.Errorf("seal cached answer: %w", err)
	}
	return sealer.Seal(string(body))
}

// openCachedAnswer decrypts what sealCachedAnswer stored.
func (s *Server) openCachedAnswer(sealed []byte) ([]byte, error) {
	sealer, err := signer.NewSealer(s.cfg.MasterKey)
	if err != nil {
		return nil, fmt.Errorf("open cached answer: %w", err)
	}
	body, err := sealer.Open(sealed)
	if err != nil {
		return nil, fmt.Errorf("open cached answer: %w", err)
	}
	return []byte(body), nil
}

// recorder keeps a copy of the answer for the idempotency store.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}
