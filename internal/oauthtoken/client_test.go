package oauthtoken_test

import (
	"errors"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"code.dny.dev/ssrf"

	"github.com/webhookd/webhookd/internal/oauthtoken"
	"github.com/webhookd/webhookd/internal/testfixtures/connectproxy"
	"github.com/webhookd/webhookd/internal/testfixtures/tokenserver"
)

// The token endpoint is an address a merchant chose: it is reached through
// the client the engine gives, with its egress proxy and its SSRF guard.
func TestTokenEndpointIsReachedThroughTheGivenClient(t *testing.T) {
	t.Run("through the egress proxy", func(t *testing.T) {
		r := newRig(t)
		tlsServer := tokenserver.NewTLS(t, clientID, r.clock.Now)
		tlsServer.Accept(clientSecret)
		proxy := connectproxy.New(t, nil)
		transport := tlsServer.HTTP.Client().Transport.(*http.Transport).Clone()
		transport.Proxy = http.ProxyURL(proxy.URL)
		w := r.newWorker(t, func(c *oauthtoken.Config) { c.HTTP = &http.Client{Transport: transport} })
		creds := r.credentials()
		creds.TokenURL = tlsServer.TokenURL()
		if _, err := w.Source(subscription, creds).Token(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got, want := proxy.Connects(), tlsServer.HTTP.Listener.Addr().String(); !slices.Equal(got, []string{want}) {
			t.Errorf("the proxy was asked for %v, want %s", got, want)
		}
	})
	t.Run("refused by the SSRF guard", func(t *testing.T) {
		r := newRig(t)
		guarded := &net.Dialer{Timeout: time.Second, Control: ssrf.New(ssrf.WithAnyPort()).Safe}
		w := r.newWorker(t, func(c *oauthtoken.Config) {
			c.HTTP = &http.Client{Transport: &http.Transport{DialContext: guarded.DialContext}}
		})
		_, err := w.Source(subscription, r.credentials()).Token(t.Context())
		if !errors.Is(err, ssrf.ErrProhibitedIP) || oauthtoken.StatusOf(err) != 0 || r.server.Requests() != 0 {
			t.Fatalf("error %v after %d requests, want the guard's refusal, no status and no request", err, r.server.Requests())
		}
	})
}
