package deliver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/testfixtures/connectproxy"
	"github.com/webhookd/webhookd/internal/testfixtures/testpki"
	"github.com/webhookd/webhookd/signer"
)

// mtlsEndpoint is a receiver that requires a client certificate issued by
// clientCA, serving a certificate of serverCA; it counts its connections
// and remembers the last client's common name.
type mtlsEndpoint struct {
	url, addr   string
	connections atomic.Int64
	clientName  atomic.Value
}

func newMTLSEndpoint(t *testing.T, serverCA, clientCA *testpki.CA, hosts ...string) *mtlsEndpoint {
	t.Helper()
	e := &mtlsEndpoint{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.clientName.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA.Pool(),
		Certificates: []tls.Certificate{serverCA.Server(t, hosts...).TLS(t)}}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.connections.Add(1)
		}
	}
	// The handshakes refused on purpose are not news.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	e.url = srv.URL + "/hook"
	e.addr = srv.Listener.Addr().String()
	return e
}

// endpointTLSOf seals an mtls authentication as the registry does and
// gives it as a lease would.
func endpointTLSOf(t *testing.T, sealer *signer.Sealer, client testpki.Issued, serverCA string) *EndpointTLS {
	t.Helper()
	plain, err := json.Marshal(subscriptions.Authentication{Type: subscriptions.AuthenticationMTLS,
		ClientCertificate: client.CertPEM, ClientKey: client.KeyPEM, ServerCA: serverCA})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := sealer.Seal(string(plain))
	if err != nil {
		t.Fatal(err)
	}
	cache := NewSecretCache(nil, sealer)
	return cache.EndpointTLS(store.LeasedDelivery{Delivery: store.Delivery{SubscriptionID: uuid.New()}, SealedAuthentication: sealed,
		AuthenticationType: subscriptions.AuthenticationMTLS})
}

// oversizedIdentity is a self-signed certificate and its RSA key of 4,608
// bits (keybounds' test data): what an older build may have stored.
func oversizedIdentity(t *testing.T) testpki.Issued {
	t.Helper()
	cert, err := os.ReadFile("../../internal/keybounds/testdata/rsa4608.crt")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile("../../internal/keybounds/testdata/rsa4608.pem")
	if err != nil {
		t.Fatal(err)
	}
	return testpki.Issued{CertPEM: string(cert), KeyPEM: string(key)}
}

func newTestSealer(t *testing.T) *signer.Sealer {
	t.Helper()
	sealer, err := signer.NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	return sealer
}

// TestSendPresentsClientCertificate: against real TLS endpoints that
// require a client certificate, an attempt with the subscription's
// certificate is delivered; one without it, or with a certificate of
// another CA, is refused with tls_handshake; server_ca is the only root
// the endpoint's certificate is checked against.
func TestSendPresentsClientCertificate(t *testing.T) {
	sealer := newTestSealer(t)
	serverCA, clientCA, strangerCA := testpki.NewCA(t, "endpoint CA"), testpki.NewCA(t, "merchant client CA"), testpki.NewCA(t, "stranger CA")
	endpoint := newMTLSEndpoint(t, serverCA, clientCA)
	ours := clientCA.ValidClient(t, "webhookd")
	theirs := strangerCA.ValidClient(t, "stranger")

	snd, err := NewSender(SenderConfig{Timeout: 5 * time.Second, AllowPrivate: true, MaxConns: 8, MaxConnsPerHost: 2, Version: "test"}, clock.System{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snd.Close)
	// The shared client trusts the endpoint's CA, as it would a public
	// one, so that the attempt without a certificate reaches the point
	// where the endpoint asks for one.
	snd.http.Transport.(*http.Transport).TLSClientConfig.RootCAs = serverCA.Pool()

	for _, tc := range []struct {
		name     string
		endpoint *EndpointTLS
		want     string // "" for delivered
	}{
		{"the subscription's certificate", endpointTLSOf(t, sealer, ours, serverCA.PEM), ""},
		{"no certificate", nil, errTLSHandshake},
		{"another CA's certificate", endpointTLSOf(t, sealer, theirs, serverCA.PEM), errTLSHandshake},
		{"server_ca of another CA", endpointTLSOf(t, sealer, ours, strangerCA.PEM), errTLS},
		{"no server_ca: the system's roots", endpointTLSOf(t, sealer, ours, ""), errTLS},
		// An older build stored a 4,608-bit key: refused before any
		// handshake, never used.
		{"a stored key beyond the bounds", endpointTLSOf(t, sealer, oversizedIdentity(t), serverCA.PEM), subscriptions.CodeAuthenticationInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := snd.Send(context.Background(), Request{Target: endpoint.url, EventID: "evt", Body: []byte(`{}`), TLS: tc.endpoint})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && !res.OK():
				t.Fatalf("send = %s (%s), want delivered", *res.ErrCode, res.Body)
			case tc.want != "" && (res.ErrCode == nil || *res.ErrCode != tc.want):
				t.Fatalf("send = %v, want %s", res.ErrCode, tc.want)
			}
		})
	}
	if got := endpoint.clientName.Load(); got != "webhookd" {
		t.Fatalf("the endpoint saw client %v, want webhookd", got)
	}
}

// TestSendKeepsConnectionsPerCertificate: attempts with one certificate
// reuse one connection (one handshake); another version of the
// certificate gets a transport of its own; the transports kept are
// bounded.
func TestSendKeepsConnectionsPerCertificate(t *testing.T) {
	sealer := newTestSealer(t)
	serverCA, clientCA := testpki.NewCA(t, "endpoint CA"), testpki.NewCA(t, "client CA")
	endpoint := newMTLSEndpoint(t, serverCA, clientCA)
	snd, err := NewSender(SenderConfig{Timeout: 5 * time.Second, AllowPrivate: true, MaxConns: 8, MaxConnsPerHost: 2, Version: "test"}, clock.System{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snd.Close)
	snd.endpoints.max = 2

	first := endpointTLSOf(t, sealer, clientCA.ValidClient(t, "first"), serverCA.PEM)
	send := func(e *EndpointTLS) {
		t.Helper()
		res, err := snd.Send(context.Background(), Request{Target: endpoint.url, EventID: "evt", Body: []byte(`{}`), TLS: e})
		if err != nil || !res.OK() {
			t.Fatalf("send = %v, %v", res.ErrCode, err)
		}
	}
	for range 5 {
		send(first)
	}
	if n := endpoint.connections.Load(); n != 1 {
		t.Fatalf("5 attempts with one certificate opened %d connections, want 1", n)
	}
	second := endpointTLSOf(t, sealer, clientCA.ValidClient(t, "second"), serverCA.PEM)
	send(second)
	if n := endpoint.connections.Load(); n != 2 || endpoint.clientName.Load() != "second" {
		t.Fatalf("another certificate: %d connections, client %v; want 2, second", n, endpoint.clientName.Load())
	}
	send(endpointTLSOf(t, sealer, clientCA.ValidClient(t, "third"), serverCA.PEM))
	if n := snd.endpoints.len(); n != 2 {
		t.Fatalf("%d transports kept, want the bound, 2", n)
	}
}

// TestMTLSKeepsTheAddressCheckAndTheEgressProxy: the transports of mTLS
// endpoints dial like the shared one: through the egress proxy, to the
// checked address, and never to a forbidden one.
func TestMTLSKeepsTheAddressCheckAndTheEgressProxy(t *testing.T) {
	sealer := newTestSealer(t)
	serverCA, clientCA := testpki.NewCA(t, "endpoint CA"), testpki.NewCA(t, "client CA")
	// The proxy tunnels the public address to the local endpoint, so that
	// nothing leaves the machine.
	endpoint := newMTLSEndpoint(t, serverCA, clientCA, "1.1.1.1")
	proxy := connectproxy.New(t, func(authority string) string {
		if authority == "1.1.1.1:8443" {
			return endpoint.addr
		}
		return "127.0.0.1:1"
	})
	cfg := guardedConfig()
	cfg.EgressProxy = proxy.URL
	snd, err := NewSender(cfg, clock.System{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snd.Close)
	ours := endpointTLSOf(t, sealer, clientCA.ValidClient(t, "webhookd"), serverCA.PEM)

	res, err := snd.Send(context.Background(), Request{Target: endpoint.url, EventID: "evt", Body: []byte(`{}`), TLS: ours})
	if err != nil || res.ErrCode == nil || *res.ErrCode != errTargetBlocked {
		t.Fatalf("send to a loopback endpoint = %v, %v; want %s", res.ErrCode, err, errTargetBlocked)
	}
	res, err = snd.Send(context.Background(), Request{Target: "https://1.1.1.1:8443/hook", EventID: "evt", Body: []byte(`{}`), TLS: ours})
	if err != nil || !res.OK() {
		t.Fatalf("send through the proxy = %v, %v; want delivered", res.ErrCode, err)
	}
	if got := proxy.Connects(); len(got) != 1 || got[0] != "1.1.1.1:8443" {
		t.Fatalf("proxy CONNECTs = %v, want the public target alone", got)
	}
	if endpoint.clientName.Load() != "webhookd" {
		t.Fatalf("the endpoint saw client %v through the proxy", endpoint.clientName.Load())
	}
}
