package mqtt_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/destination"
)

// TestTLS: with "tls": true the publisher speaks TLS to a Mosquitto TLS
// listener and checks its certificate by the system's roots and the
// broker's host name. The roots are testdata/ca.pem, given as
// SSL_CERT_FILE before this process first reads them (no other test of
// the package uses TLS; files of fixed content, so that a second run in
// the same process, -count=2, finds the roots it cached the same).
// testdata's certificate is for 127.0.0.1: the same listener named
// localhost is refused, in words that say why.
func TestTLS(t *testing.T) {
	caFile, err := filepath.Abs("testdata/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := os.ReadFile("testdata/server.pem")
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile("testdata/server-key.pem")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", caFile)
	broker := startBroker(t, map[string]string{"cert.pem": string(certPEM), "key.pem": string(keyPEM)},
		"certfile DIR/cert.pem", "keyfile DIR/key.pem")
	topic := uniqueTopic(t)
	sub := subscribeTLS(t, broker.Addr, caPEM, topic)

	cfg := strings.Replace(config(broker.Addr, topic, testUser, testPassword), `"tls":false`, `"tls":true`, 1)
	p := open(t, cfg)
	if _, err := send(t, p, message("evt_tls", []byte(`{"id":"evt_tls"}`))); err != nil {
		t.Fatalf("send over TLS: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got := sub.Receive(ctx, t); got.Headers["webhook-id"] != "evt_tls" {
		t.Fatalf("received %s, want evt_tls", got.Headers["webhook-id"])
	}

	// The same listener named by a name its certificate does not hold.
	_, port, _ := net.SplitHostPort(broker.Addr)
	wrongHost := strings.Replace(cfg, broker.Addr, "localhost:"+port, 1)
	_, err = send(t, open(t, wrongHost), message("evt_tls_wrong_host", []byte(`{}`)))
	if said := failsAs(t, err, destination.CodeUnreachable); !strings.Contains(said, "does not name its host") {
		t.Errorf("said %q, want the certificate's host named as the cause", said)
	}

	// In clear against the TLS listener: no CONNACK, unreachable.
	_, err = send(t, open(t, strings.Replace(cfg, `"tls":true`, `"tls":false`, 1)), message("evt_clear", []byte(`{}`)))
	failsAs(t, err, destination.CodeUnreachable)
}
