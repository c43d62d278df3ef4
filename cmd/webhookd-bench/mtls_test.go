package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestMTLSReceiversRequireTheClientCertificate serves the mtls scenario's
// receivers with its PKI: a client presenting the issued certificate and
// trusting only the CA is served, over one kept connection (one
// handshake for two deliveries); one without a certificate is refused at
// the handshake, which is counted too.
func TestMTLSReceiversRequireTheClientCertificate(t *testing.T) {
	pki, err := newBenchPKI(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	log := newPublishLog(4)
	rcv, key := armedReceiversWith(t, 1, 0, log, receiverOptions{tls: pki.serverConfig()})
	defer rcv.close()
	url := rcv.endpoints[0].url
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("endpoint %s, want https on 127.0.0.1", url)
	}
	auth := pki.authentication()
	cert, err := tls.X509KeyPair([]byte(auth["client_certificate"]), []byte(auth["client_key"]))
	if err != nil {
		t.Fatalf("the subscription's certificate and key: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(auth["server_ca"])) {
		t.Fatal("server_ca is not PEM")
	}
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
	}
	with := client(cert)
	defer with.CloseIdleConnections()
	body := []byte(`{"id":"x","payload":{}}`)
	for i := range 2 {
		id := uuid.NewString()
		log.record(id, time.Now())
		status, err := post(t, with, url, id, time.Now(), body, key)
		if err != nil || status != http.StatusNoContent {
			t.Fatalf("delivery %d with the certificate: %d, %v", i, status, err)
		}
	}
	if h, c, u := rcv.handshakes.Load(), rcv.connections.Load(), rcv.counts().Unique; h != 1 || c != 1 || u != 2 {
		t.Errorf("with the certificate: %d handshakes, %d connections, %d deliveries; want 1, 1, 2", h, c, u)
	}
	without := client()
	defer without.CloseIdleConnections()
	if status, err := post(t, without, url, uuid.NewString(), time.Now(), body, key); err == nil {
		t.Errorf("without a certificate: answered %d, want the handshake refused", status)
	}
	if h, u := rcv.handshakes.Load(), rcv.counts().Unique; h != 2 || u != 2 {
		t.Errorf("after the refused client: %d handshakes, %d deliveries; want 2, 2", h, u)
	}
}
