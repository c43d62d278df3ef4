package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/invalid"
)

// requestRules are the middleware that judge a request before anyone asks
// who sent it: its transport (HTTPS, trusted proxies), its body's size, the
// api-version it asks for, and, on the internal listener, the ingest
// token. They hold only the configuration those rules read; authentication
// (authenticator), idempotency and rate limits are types of their own
// because they need the store or Redis.
type requestRules struct {
	respond responder
	// requireTLS refuses plain-HTTP requests that no trusted proxy vouches
	// for (Config.RequireHTTPS).
	requireTLS bool
	// trustedProxies may set X-Forwarded-Proto.
	trustedProxies []netip.Prefix
	// maxBodyBytes bounds every request body (413 above it).
	maxBodyBytes int64
	// versions is the API version catalogue that api-version is read
	// against; clock tells which versions are past their sunset.
	versions Versions
	clock    clock.Clock
	// ingestToken guards the internal routes; empty refuses them all.
	ingestToken string
}

// correlate gives every request a correlation id, sent back as the
// Correlation-Id header and carried by every log line and error body.
func correlate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := uuid.NewString()
		w.Header().Set("Correlation-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyCorrelation, id)))
	})
}

// requireHTTPS refuses plain HTTP unless the listener is loopback (then
// RequireHTTPS is false) or a trusted proxy says the client used HTTPS.
func (rr requestRules) requireHTTPS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rr.requireTLS || r.TLS != nil || rr.fromTrustedProxy(r) && r.Header.Get("X-Forwarded-Proto") == "https" {
			next.ServeHTTP(w, r)
			return
		}
		rr.respond.writeError(w, r, errHTTPSRequired)
	})
}

// fromTrustedProxy tells whether the request's peer is a trusted proxy.
func (rr requestRules) fromTrustedProxy(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(rr.trustedProxies, func(p netip.Prefix) bool { return p.Contains(ip.Unmap()) })
}

// limitBody reads the whole body once, bounded by MaxBodyBytes, so that the
// idempotency hash and the handler see the same bytes.
func (rr requestRules) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rr.maxBodyBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				rr.respond.writeError(w, r, errPayloadTooLarge)
				return
			}
			rr.respond.writeError(w, r, errValidation("", "The request body could not be read."))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyBody, body)))
	})
}

// requestedVersion validates the api-version header (spec 9.3) and echoes a
// version on every /v1 answer, errors included. Until the merchant is known
// the echo is the requested or the latest version.
func (rr requestRules) requestedVersion(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requested := r.Header.Get("api-version")
		if requested == "" {
			rr.versions.setHeaders(w, rr.versions.Latest())
			next.ServeHTTP(w, r)
			return
		}
		if !rr.versions.Usable(requested, rr.clock.Now()) {
			rr.versions.setHeaders(w, rr.versions.Latest())
			rr.respond.writeError(w, r, errAPIVersion("Unknown or unsupported api-version "+invalid.Quote(requested)+"; see GET /v1/api_versions."))
			return
		}
		rr.versions.setHeaders(w, requested)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyVersion, requested)))
	})
}

// markLegacy marks a request as the legacy surface's, whose bodies are
// camelCase and whose errors have the legacy shape.
func markLegacy(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyLegacy, true)))
	})
}

// requireIngestToken guards the internal routes; with no token configured
// it refuses everything.
func (rr requestRules) requireIngestToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := bearerKey(r)
		want := rr.ingestToken
		if want == "" {
			rr.respond.writeError(w, r, errIngestTokenUnset)
			return
		}
		if got == "" || subtle.ConstantTimeCompare(hashToken(got), hashToken(want)) != 1 {
			rr.respond.writeError(w, r, errIngestToken)
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
