// Package tokenserver is a real OAuth2 token endpoint for tests (RFC 6749
// client credentials, with a client secret or an RFC 7523 private_key_jwt
// assertion checked with a JWT library), counting the tokens it issues.
package tokenserver

import (
	"crypto"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Server is a real OAuth2 token endpoint for the tests: it grants the
// client credentials of one client, with a secret or a private_key_jwt
// assertion checked against the client's public key, issues numbered
// tokens that expire after expiresIn, and counts the requests.
type Server struct {
	// HTTP is the server it runs on: its URL, its client (which trusts
	// it, on https), Close. A field, not embedded, so that the fixture's
	// own methods are not lost among httptest's.
	HTTP     *httptest.Server
	clientID string
	// PublicKey checks private_key_jwt assertions; nil: secrets only.
	PublicKey crypto.PublicKey
	// now is the test's clock, which signs the assertions.
	now func() time.Time

	mu sync.Mutex
	// secrets are the client secrets it accepts.
	secrets   []string
	calls     int
	failWith  int
	hold      *Hold
	expiresIn int
	jtis      map[string]bool
	// issued holds the tokens it issued, false once revoked.
	issued   map[string]bool
	forms    []map[string][]string
	refusals []string
}

// New starts a token endpoint granting clientID's credentials, stopped
// when t ends; now is the test's clock, which judges assertions.
func New(t testing.TB, clientID string, now func() time.Time) *Server {
	s := unstarted(t, clientID, now)
	s.HTTP.Start()
	return s
}

// NewTLS is New on https.
func NewTLS(t testing.TB, clientID string, now func() time.Time) *Server {
	s := unstarted(t, clientID, now)
	s.HTTP.StartTLS()
	return s
}

func unstarted(t testing.TB, clientID string, now func() time.Time) *Server {
	s := &Server{clientID: clientID, now: now, expiresIn: 3600, jtis: map[string]bool{}, issued: map[string]bool{}}
	s.HTTP = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.HTTP.Close)
	return s
}

// TokenURL is its token endpoint.
func (s *Server) TokenURL() string { return s.HTTP.URL + "/oauth/token" }

// Accept makes it take secret too.
func (s *Server) Accept(secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets = append(s.secrets, secret)
}

// Expire makes its tokens last seconds from now on.
func (s *Server) Expire(seconds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expiresIn = seconds
}

// Form is the i-th request's form.
func (s *Server) Form(i int) map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forms[i]
}

// Failing makes every request answer status (0: grant again).
func (s *Server) Failing(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = status
}

// Hold keeps one request waiting.
type Hold struct {
	// Arrived is closed when the request has Arrived.
	Arrived chan struct{}
	// Release lets it be answered.
	Release chan struct{}
}

// Holding makes the next request wait until Released.
func (s *Server) Holding() *Hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = &Hold{Arrived: make(chan struct{}), Release: make(chan struct{})}
	return s.hold
}

// Revoke makes token invalid, as an authorization server does when it
// rotates its keys or a client's grants.
func (s *Server) Revoke(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issued[token] = false
}

// Valid reports whether token was issued and not revoked: what the
// receiving endpoint checks.
func (s *Server) Valid(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issued[token]
}

// Requests is how many token requests it has had.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Refused lists why it refused requests it should not have had.
func (s *Server) Refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refusals)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls++
	n, fail, hold, expiresIn := s.calls, s.failWith, s.hold, s.expiresIn
	s.hold = nil
	s.mu.Unlock()
	if hold != nil {
		close(hold.Arrived)
		<-hold.Release
	}
	if fail != 0 {
		w.WriteHeader(fail)
		return
	}
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.URL.Path != "/oauth/token" ||
		r.PostForm.Get("grant_type") != "client_credentials" {
		s.refuse(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("not a client credentials request: %v", err))
		return
	}
	s.mu.Lock()
	s.forms = append(s.forms, r.PostForm)
	s.mu.Unlock()
	if why := s.authenticate(r); why != "" {
		s.refuse(w, http.StatusUnauthorized, "invalid_client", why)
		return
	}
	token := fmt.Sprintf("token-%d-%s", n, s.clientID)
	s.mu.Lock()
	s.issued[token] = true
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "bearer", "expires_in": expiresIn})
}

// authenticate is the client authentication's fault, or "".
func (s *Server) authenticate(r *http.Request) string {
	if id, secret, ok := r.BasicAuth(); ok {
		s.mu.Lock()
		known := slices.Contains(s.secrets, secret)
		s.mu.Unlock()
		if id != s.clientID || !known {
			return "wrong client id or secret"
		}
		return ""
	}
	if s.PublicKey == nil {
		return "no client secret"
	}
	return s.checkAssertion(r)
}

// checkAssertion checks a private_key_jwt assertion (RFC 7523 §3): the
// type, the signature against the client's public key, iss = sub = the
// client id, aud = the token URL, an expiry, and a jti never seen before.
func (s *Server) checkAssertion(r *http.Request) string {
	f := r.PostForm
	if f.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		return "client_assertion_type is " + f.Get("client_assertion_type")
	}
	if f.Has("client_secret") || f.Get("client_id") != s.clientID {
		return "a client secret or another client id beside the assertion"
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(f.Get("client_assertion"), &claims, func(*jwt.Token) (any, error) { return s.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256", "ES256", "ES384"}), jwt.WithIssuer(s.clientID), jwt.WithSubject(s.clientID),
		jwt.WithAudience(s.TokenURL()), jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithTimeFunc(s.now))
	switch {
	case err != nil:
		return "assertion: " + err.Error()
	case claims.ID == "":
		return "assertion without jti"
	case claims.ExpiresAt.Sub(s.now()) > 5*time.Minute:
		return "assertion valid for more than five minutes"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jtis[claims.ID] {
		return "assertion jti used twice"
	}
	s.jtis[claims.ID] = true
	return ""
}

func (s *Server) refuse(w http.ResponseWriter, status int, code, why string) {
	s.mu.Lock()
	s.refusals = append(s.refusals, why)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": why})
}

// Endpoint is a webhook endpoint that takes only the bearer tokens its
// Server issued and has not revoked, and counts what it accepted and what
// it refused (401).
type Endpoint struct {
	// URL is where it takes webhooks.
	URL               string
	accepted, refused atomic.Int64
}

// NewEndpoint starts an Endpoint of s, stopped when t ends.
func (s *Server) NewEndpoint(t testing.TB) *Endpoint {
	e := &Endpoint{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokens := r.Header.Values("Authorization")
		token, ok := "", len(tokens) == 1
		if ok {
			token, ok = strings.CutPrefix(tokens[0], "Bearer ")
		}
		if !ok || !s.Valid(token) {
			e.refused.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		e.accepted.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	e.URL = srv.URL + "/hooks"
	return e
}

// Accepted is how many requests it accepted.
func (e *Endpoint) Accepted() int64 { return e.accepted.Load() }

// Refused is how many requests it refused for their token.
func (e *Endpoint) Refused() int64 { return e.refused.Load() }
