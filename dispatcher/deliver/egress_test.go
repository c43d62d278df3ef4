package deliver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/testfixtures/connectproxy"
)

// localhostTLS starts an HTTPS receiver whose certificate is for the name
// localhost only, recording the SNI and Host of each request, and returns
// it with a pool trusting its certificate.
func localhostTLS(t *testing.T, seen func(sni, host string)) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen(r.TLS.ServerName, r.Host)
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, roots
}

// TestEgressProxyTunnelsToTheCheckedAddress sends through a real CONNECT
// proxy: the CONNECT names the resolved address, never the host name,
// while TLS (SNI, certificate) and the Host header still name the host.
func TestEgressProxyTunnelsToTheCheckedAddress(t *testing.T) {
	var mu sync.Mutex
	var snis, hosts []string
	rcv, roots := localhostTLS(t, func(sni, host string) {
		mu.Lock()
		defer mu.Unlock()
		snis, hosts = append(snis, sni), append(hosts, host)
	})
	_, port, _ := net.SplitHostPort(rcv.Listener.Addr().String())
	proxy := connectproxy.New(t, nil)
	cfg := SenderConfig{Timeout: 5 * time.Second, AllowPrivate: true, MaxConns: 4, MaxConnsPerHost: 1,
		Version: "test", EgressProxy: proxy.URL}
	snd, err := NewSender(cfg, clock.System{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd.http.Transport.(*http.Transport).TLSClientConfig.RootCAs = roots
	// localhost comes from /etc/hosts; the receiver listens on 127.0.0.1.
	res := sendPlain(t, snd, "https://localhost:"+port+"/hook")
	if !res.OK() || res.HTTPStatus == nil || *res.HTTPStatus != http.StatusNoContent {
		t.Fatalf("send through the proxy: %+v, want a 204", res)
	}
	if got := proxy.Connects(); len(got) != 1 || got[0] != "127.0.0.1:"+port {
		t.Errorf("proxy CONNECTs = %v, want one to the checked address 127.0.0.1:%s", got, port)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(snis) != 1 || snis[0] != "localhost" || hosts[0] != "localhost:"+port {
		t.Errorf("receiver saw SNI %v Host %v, want localhost and localhost:%s", snis, hosts, port)
	}
}

// TestEgressProxyKeepsTheAddressCheck sets a proxy with the address check
// on: forbidden targets are target_blocked and the proxy is never asked
// for them; a public address passes the check and goes through the proxy
// (which tunnels it to a local receiver, so that nothing leaves the
// machine); a proxy that refuses the tunnel is a network error.
func TestEgressProxyKeepsTheAddressCheck(t *testing.T) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rcv.Close)
	local := rcv.Listener.Addr().String()
	proxy := connectproxy.New(t, func(authority string) string {
		if authority == "1.1.1.1:8443" {
			return local
		}
		return "127.0.0.1:1" // nothing listens there: the proxy answers 502
	})
	cfg := guardedConfig()
	cfg.EgressProxy = proxy.URL
	snd, err := NewSender(cfg, clock.System{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	code := func(res Result) string {
		if res.ErrCode == nil {
			return "ok"
		}
		return *res.ErrCode
	}
	for _, target := range []string{"http://localhost:8080/", "http://127.0.0.1:9/hook", "http://[::ffff:10.0.0.1]:8443/",
		"http://169.254.169.254/latest/meta-data", "http://[fd00::1]/", "http://" + local + "/"} {
		res := sendPlain(t, snd, target)
		if code(res) != errTargetBlocked || res.outcome != metrics.OutcomeBlocked {
			t.Errorf("send(%s) through the proxy = %s (%s), want %s", target, code(res), res.outcome, errTargetBlocked)
		}
	}
	if got := proxy.Connects(); len(got) != 0 {
		t.Fatalf("the proxy was asked for forbidden targets: %v", got)
	}
	if res := sendPlain(t, snd, "http://1.1.1.1:8443/hook"); !res.OK() {
		t.Errorf("public target through the proxy: %s, want delivered", code(res))
	}
	if res := sendPlain(t, snd, "http://8.8.8.8:443/hook"); code(res) != errNetwork {
		t.Errorf("a tunnel the proxy refuses: %s, want %s", code(res), errNetwork)
	}
	if got := strings.Join(proxy.Connects(), " "); got != "1.1.1.1:8443 8.8.8.8:443" {
		t.Errorf("proxy CONNECTs = %q, want the two public targets", got)
	}
}
