package main

import (
	"context"
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
	"time"
)

// mtls is single's workload to a receiver that requires a client
// certificate (issue 26): an HTTPS server on 127.0.0.1 with
// RequireAndVerifyClientCert, its certificate and the engine's client
// certificate issued by a CA the bench makes in memory, given to the
// subscription as its server_ca. Beside single's figures it reports the
// TLS handshakes and connections the receiver saw: the engine keeps
// connections per subscription, so a run should need a few, not one per
// delivery.
func mtls(ctx context.Context, l *lab) (*report, error) {
	pki, err := newBenchPKI(time.Now())
	if err != nil {
		return nil, err
	}
	auth := pki.authentication()
	r, res, rcv, err := singleShaped(ctx, l, "mtls", " over mTLS (RequireAndVerifyClientCert, a private CA)", endpointShape{
		receiving: receiverOptions{tls: pki.serverConfig()},
		fields: func(_ int, url string) map[string]any {
			return map[string]any{"url": url, "authentication": auth}
		},
	}, nil)
	if err != nil {
		return r, err
	}
	handshakes := rcv.handshakes.Load()
	r.add("tls_handshakes", handshakes, "handshakes")
	r.add("receiver_connections", rcv.connections.Load(), "connections")
	if handshakes > 0 {
		r.add("deliveries_per_handshake", float64(res.received)/float64(handshakes), "deliveries")
	}
	return r, nil
}

// countingHandshakes returns conf counting in rs.handshakes every TLS
// handshake a client begins (each ClientHello, resumed or not).
func (rs *receivers) countingHandshakes(conf *tls.Config) *tls.Config {
	c := conf.Clone()
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		rs.handshakes.Add(1)
		return nil, nil // nil: the handshake goes on with c itself
	}
	return c
}

// benchPKI is a private CA made for one run, in memory, and the two
// certificates it issued: the receivers' (for 127.0.0.1) and the engine's
// client certificate.
type benchPKI struct {
	ca     *x509.Certificate
	caPEM  []byte
	server tls.Certificate
	// clientCertPEM and clientKeyPEM are what the subscription is given.
	clientCertPEM, clientKeyPEM []byte
}

// newBenchPKI makes a CA and issues the receivers' and the engine's
// certificates, valid from an hour before now for a day.
func newBenchPKI(now time.Time) (*benchPKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("bench CA: %w", err)
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "webhookd-bench CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, ca, err := issue(caTmpl, &caKey.PublicKey, nil, caKey)
	if err != nil {
		return nil, err
	}
	p := &benchPKI{ca: ca, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}

	serverKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("bench server key: %w", err)
	}
	serverDER, _, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
		NotBefore:   caTmpl.NotBefore, NotAfter: caTmpl.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, &serverKey.PublicKey, ca, caKey)
	if err != nil {
		return nil, err
	}
	p.server = tls.Certificate{Certificate: [][]byte{serverDER}, PrivateKey: serverKey}

	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("bench client key: %w", err)
	}
	clientDER, _, err := issue(&x509.Certificate{
		Subject:   pkix.Name{CommonName: "webhookd", Organization: []string{"webhookd-bench"}},
		NotBefore: caTmpl.NotBefore, NotAfter: caTmpl.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, &clientKey.PublicKey, ca, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		return nil, fmt.Errorf("bench client key: %w", err)
	}
	p.clientCertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: clientDER})
	p.clientKeyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return p, nil
}

// issue signs tmpl for pub with the parent's key (self-signed when parent
// is nil), under a random serial number.
func issue(tmpl *x509.Certificate, pub any, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) ([]byte, *x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("certificate serial: %w", err)
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: %w", tmpl.Subject.CommonName, err)
	}
	return der, cert, nil
}

// serverConfig is the receivers' TLS: the CA's server certificate, and a
// client certificate from the same CA required on every connection.
func (p *benchPKI) serverConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	return &tls.Config{
		Certificates: []tls.Certificate{p.server},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}
}

// authentication is the subscription's authentication field: the client
// certificate and key, and the CA as the only root of the receivers'
// certificate.
func (p *benchPKI) authentication() map[string]string {
	return map[string]string{
		"type":               "mtls",
		"client_certificate": string(p.clientCertPEM),
		"client_key":         string(p.clientKeyPEM),
		"server_ca":          string(p.caPEM),
	}
}
