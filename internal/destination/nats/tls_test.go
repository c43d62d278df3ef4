package nats_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"github.com/webhookd/webhookd/internal/destination"
)

// trusted is the authority this test process trusts, as a system's
// roots: the kind checks servers against the system's roots only (a
// merchant cannot name another), so TestMain puts this one there
// (SSL_CERT_FILE, read once by crypto/x509 when first needed). Set once
// before the tests run, read only after.
var trusted *authority

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "webhookd-nats-tls")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	trusted, err = newAuthority()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	file := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: trusted.cert.Raw}), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.Setenv("SSL_CERT_FILE", file); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// authority is a certificate authority of the test's.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhookd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return &authority{cert: cert, key: key}, err
}

// serverCert is a server certificate of a's for the names and IPs.
func (a *authority) serverCert(t testing.TB, dns []string, ips []net.IP) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "nats test server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: dns, IPAddresses: ips,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsServer is an in-process server with cert; optional lets clients
// choose (tls_available), else TLS is required.
func tlsServer(t testing.TB, cert tls.Certificate, optional bool) *testServer {
	return startServer(t, func(o *server.Options) {
		o.TLS, o.AllowNonTLS, o.TLSTimeout = true, optional, 2
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	})
}

// testClientTLS is the test client's TLS, trusting the test's authority.
func testClientTLS() natsgo.Option {
	pool := x509.NewCertPool()
	pool.AddCert(trusted.cert)
	return natsgo.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
}

func TestTLS(t *testing.T) {
	localhost := []net.IP{net.ParseIP("127.0.0.1")}
	good := trusted.serverCert(t, nil, localhost)
	t.Run("tls set, the server requires it: delivered", func(t *testing.T) {
		srv := tlsServer(t, good, false)
		s := newStream(t, srv.addr(), testClientTLS())
		p := open(t, config([]string{srv.addr()}, s.subject, `, "tls": true`))
		send(t, p, message("evt_tls"))
		if got := s.receive(receiveCtx(t), t); got.Headers["webhook-id"] != "msg_evt_tls" {
			t.Errorf("received %v", got.Headers)
		}
	})
	t.Run("tls set, the server offers it: delivered over TLS", func(t *testing.T) {
		srv := tlsServer(t, good, true)
		s := newStream(t, srv.addr(), testClientTLS())
		p := open(t, config([]string{srv.addr()}, s.subject, `, "tls": true`))
		send(t, p, message("evt_tls_optional"))
		connz, err := srv.srv.Connz(&server.ConnzOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range connz.Conns {
			if c.Name == "webhookd/test" {
				n++
				if c.TLSVersion == "" {
					t.Error("the publisher's connection is not TLS")
				}
			}
		}
		if n != 1 {
			t.Errorf("%d connections of the publisher, want 1", n)
		}
	})
	t.Run("tls not set, the server requires it: upgraded, delivered", func(t *testing.T) {
		srv := tlsServer(t, good, false)
		s := newStream(t, srv.addr(), testClientTLS())
		p := open(t, config([]string{srv.addr()}, s.subject, ""))
		send(t, p, message("evt_tls_upgraded"))
	})
	t.Run("tls set, the server offers none", func(t *testing.T) {
		p := open(t, config([]string{machineServer}, "webhookd.tls", `, "tls": true`))
		sendFails(t, p, message("evt_tls_none"), destination.CodeRefused, "does not offer TLS")
	})
	t.Run("a certificate from an authority not trusted", func(t *testing.T) {
		other, err := newAuthority()
		if err != nil {
			t.Fatal(err)
		}
		srv := tlsServer(t, other.serverCert(t, nil, localhost), false)
		p := open(t, config([]string{srv.addr()}, "webhookd.tls", `, "tls": true`))
		sendFails(t, p, message("evt_tls_untrusted"), destination.CodeUnreachable, "not from a trusted authority")
	})
	t.Run("a certificate for another host", func(t *testing.T) {
		srv := tlsServer(t, trusted.serverCert(t, []string{"nats.example.com"}, nil), false)
		p := open(t, config([]string{srv.addr()}, "webhookd.tls", `, "tls": true`))
		sendFails(t, p, message("evt_tls_wronghost"), destination.CodeUnreachable, "does not name its host")
	})
}
