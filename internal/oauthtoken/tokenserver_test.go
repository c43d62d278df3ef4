package oauthtoken_test

import (
	"crypto"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// tokenServer is a real OAuth2 token endpoint for the tests: it grants the
// client credentials of one client, with a secret or a private_key_jwt
// assertion checked against the client's public key, issues numbered
// tokens that expire after expiresIn, and counts the requests.
type tokenServer struct {
	*httptest.Server
	clientID string
	// publicKey checks private_key_jwt assertions; nil: secrets only.
	publicKey crypto.PublicKey
	// now is the test's clock, which signs the assertions.
	now func() time.Time

	mu sync.Mutex
	// secrets are the client secrets it accepts.
	secrets   []string
	calls     int
	failWith  int
	hold      *hold
	expiresIn int
	jtis      map[string]bool
	// issued holds the tokens it issued, false once revoked.
	issued   map[string]bool
	forms    []map[string][]string
	refusals []string
}

func newTokenServer(t *testing.T, clientID string, now func() time.Time) *tokenServer {
	s := unstartedTokenServer(t, clientID, now)
	s.Start()
	return s
}

// newTLSTokenServer is newTokenServer on https.
func newTLSTokenServer(t *testing.T, clientID string, now func() time.Time) *tokenServer {
	s := unstartedTokenServer(t, clientID, now)
	s.StartTLS()
	return s
}

func unstartedTokenServer(t *testing.T, clientID string, now func() time.Time) *tokenServer {
	s := &tokenServer{clientID: clientID, now: now, expiresIn: 3600, jtis: map[string]bool{}, issued: map[string]bool{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *tokenServer) tokenURL() string { return s.URL + "/oauth/token" }

// accept makes it take secret too.
func (s *tokenServer) accept(secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets = append(s.secrets, secret)
}

// expire makes its tokens last seconds from now on.
func (s *tokenServer) expire(seconds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expiresIn = seconds
}

// form is the i-th request's form.
func (s *tokenServer) form(i int) map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forms[i]
}

// failing makes every request answer status (0: grant again).
func (s *tokenServer) failing(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = status
}

// hold keeps one request waiting.
type hold struct {
	// arrived is closed when the request has arrived.
	arrived chan struct{}
	// release lets it be answered.
	release chan struct{}
}

// holding makes the next request wait until released.
func (s *tokenServer) holding() *hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = &hold{arrived: make(chan struct{}), release: make(chan struct{})}
	return s.hold
}

// revoke makes token invalid, as an authorization server does when it
// rotates its keys or a client's grants.
func (s *tokenServer) revoke(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issued[token] = false
}

// valid reports whether token was issued and not revoked: what the
// receiving endpoint checks.
func (s *tokenServer) valid(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issued[token]
}

// requests is how many token requests it has had.
func (s *tokenServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// refused lists why it refused requests it should not have had.
func (s *tokenServer) refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refusals)
}

func (s *tokenServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls++
	n, fail, hold, expiresIn := s.calls, s.failWith, s.hold, s.expiresIn
	s.hold = nil
	s.mu.Unlock()
	if hold != nil {
		close(hold.arrived)
		<-hold.release
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
func (s *tokenServer) authenticate(r *http.Request) string {
	if id, secret, ok := r.BasicAuth(); ok {
		s.mu.Lock()
		known := slices.Contains(s.secrets, secret)
		s.mu.Unlock()
		if id != s.clientID || !known {
			return "wrong client id or secret"
		}
		return ""
	}
	if s.publicKey == nil {
		return "no client secret"
	}
	return s.checkAssertion(r)
}

// checkAssertion checks a private_key_jwt assertion (RFC 7523 §3): the
// type, the signature against the client's public key, iss = sub = the
// client id, aud = the token URL, an expiry, and a jti never seen before.
func (s *tokenServer) checkAssertion(r *http.Request) string {
	f := r.PostForm
	if f.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		return "client_assertion_type is " + f.Get("client_assertion_type")
	}
	if f.Has("client_secret") || f.Get("client_id") != s.clientID {
		return "a client secret or another client id beside the assertion"
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(f.Get("client_assertion"), &claims, func(*jwt.Token) (any, error) { return s.publicKey, nil },
		jwt.WithValidMethods([]string{"RS256", "ES256", "ES384"}), jwt.WithIssuer(s.clientID), jwt.WithSubject(s.clientID),
		jwt.WithAudience(s.tokenURL()), jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithTimeFunc(s.now))
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

func (s *tokenServer) refuse(w http.ResponseWriter, status int, code, why string) {
	s.mu.Lock()
	s.refusals = append(s.refusals, why)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": why})
}
