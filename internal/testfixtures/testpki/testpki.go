// Package testpki makes certificate authorities and the certificates they
// issue, in memory, for tests of TLS clients and servers (mTLS endpoints).
// Keys are ECDSA P-256: quick to make.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA's certificate in PEM.
	PEM string
}

// Issued is a certificate with its key.
type Issued struct {
	Cert *x509.Certificate
	// CertPEM and KeyPEM are the certificate and its PKCS #8 key in PEM.
	CertPEM, KeyPEM string
}

// NewCA makes a CA named name, valid from an hour ago for a year.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, key: key, PEM: encode("CERTIFICATE", der)}
}

// Pool is a pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Client issues a client certificate for name, valid between notBefore and
// notAfter.
func (ca *CA) Client(t testing.TB, name string, notBefore, notAfter time.Time) Issued {
	t.Helper()
	return ca.issue(t, &x509.Certificate{
		Subject:   pkix.Name{CommonName: name, Organization: []string{"webhookd tests"}},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// ValidClient issues a client certificate for name, valid from an hour
// ago to an hour from now.
func (ca *CA) ValidClient(t testing.TB, name string) Issued {
	t.Helper()
	return ca.Client(t, name, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// Server issues a server certificate for 127.0.0.1, localhost and hosts
// (names or IP addresses), valid for a day.
func (ca *CA) Server(t testing.TB, hosts ...string) Issued {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:   pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(t, tmpl)
}

func (ca *CA) issue(t testing.TB, tmpl *x509.Certificate) Issued {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = serial(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Issued{Cert: cert, CertPEM: encode("CERTIFICATE", der), KeyPEM: encode("PRIVATE KEY", pkcs8)}
}

// TLS is the issued certificate for a tls.Config.
func (i Issued) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair([]byte(i.CertPEM), []byte(i.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func encode(kind string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}))
}
