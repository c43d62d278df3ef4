package connectproxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/webhookd/webhookd/internal/testfixtures/connectproxy"
)

// TestTunnelsAndRecords sends a request through the proxy with the
// standard library's own proxy support: it arrives, the CONNECT is
// recorded, and a request that is not a CONNECT is refused.
func TestTunnelsAndRecords(t *testing.T) {
	target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "through")
	}))
	t.Cleanup(target.Close)
	p := connectproxy.New(t, nil)
	client := target.Client()
	client.Transport.(*http.Transport).Proxy = http.ProxyURL(p.URL)
	resp, err := client.Get(target.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "through" {
		t.Errorf("body %q, want the target's", body)
	}
	u, _ := url.Parse(target.URL)
	if got := p.Connects(); len(got) != 1 || got[0] != u.Host {
		t.Errorf("connects = %v, want [%s]", got, u.Host)
	}
	plain, err := http.Get(p.URL.String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	plain.Body.Close()
	if plain.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("a GET to the proxy: %d, want 405", plain.StatusCode)
	}
}
