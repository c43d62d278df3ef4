package pubsub_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/webhookd/webhookd/internal/destination/desttest"
)

// The test topic.
const (
	project = "webhookd-test"
	topic   = "webhooks"
)

// serverCert is the TLS certificate of the test's Pub/Sub server with a
// key, for 127.0.0.1, made by TestMain from a CA that this test binary's
// x509 system pool holds (SSL_CERT_FILE): Google's library dials an
// endpoint with credentials over TLS and trusts the system's roots, as it
// does Google's own endpoint.
var serverCert tls.Certificate

// TestMain makes the CA and the server certificate, and names the CA as
// the process's roots before anything reads them.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pubsub-test-ca")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	caFile, cert, err := testCA(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	serverCert = cert
	os.Setenv("SSL_CERT_FILE", caFile)
	os.Setenv("SSL_CERT_DIR", dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// testCA writes a CA's certificate in dir and returns its file and a
// server certificate it signed for 127.0.0.1.
func testCA(dir string) (string, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhookd pubsub test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		return "", tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	return caFile, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// pubSub is Google's in-process Pub/Sub server (pstest) with the test
// topic, served twice: as an emulator (no TLS, no credentials) at Addr,
// and at TLSAddr over TLS, where a publish must carry a JWT signed by the
// service account key it was made with, as Pub/Sub checks the
// self-signed JWT a service account key makes (anything else is
// Unauthenticated).
type pubSub struct {
	*pstest.Server
	TLSAddr string
	// Key is the service account key TLSAddr takes, as its JSON.
	Key string

	mu   sync.Mutex
	next int // the next message Receive returns
}

// newPubSub starts it, each option reacting to the emulator's requests
// (pstest.WithErrorInjection: a refusal of the test's choosing).
func newPubSub(t *testing.T, opts ...pstest.ServerReactorOption) *pubSub {
	t.Helper()
	srv := pstest.NewServer(opts...)
	t.Cleanup(func() { srv.Close() })
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pubsubpb.NewPublisherClient(conn).CreateTopic(context.Background(),
		&pubsubpb.Topic{Name: "projects/" + project + "/topics/" + topic}); err != nil {
		t.Fatal(err)
	}
	pemKey, pub := rsaKey(t)
	p := &pubSub{Server: srv, Key: serviceAccount(t, pemKey, nil)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12})),
		grpc.UnaryInterceptor(checkJWT(pub)))
	pubsubpb.RegisterPublisherServer(gs, &srv.GServer)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	p.TLSAddr = l.Addr().String()
	return p
}

// checkJWT refuses a call without a bearer JWT signed by pub, by RS256,
// issued by the service account, unexpired.
func checkJWT(pub *rsa.PublicKey) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		var bearer string
		if v := md.Get("authorization"); len(v) == 1 {
			bearer, _ = strings.CutPrefix(v[0], "Bearer ")
		}
		token, err := jwt.Parse(bearer, func(*jwt.Token) (any, error) { return pub, nil },
			jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(clientEmail), jwt.WithExpirationRequired())
		if err != nil || !token.Valid {
			return nil, status.Error(codes.Unauthenticated, "Request had invalid authentication credentials.")
		}
		return handler(ctx, req)
	}
}

// receiver is desttest's Receive: the server's next message, in the
// order it took them.
func (p *pubSub) receiver() func(ctx context.Context, t testing.TB) desttest.Arrived {
	return func(ctx context.Context, t testing.TB) desttest.Arrived {
		t.Helper()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			msgs := p.Messages()
			p.mu.Lock()
			if p.next < len(msgs) {
				m := msgs[p.next]
				p.next++
				p.mu.Unlock()
				return desttest.Arrived{Body: m.Data, Headers: m.Attributes, Key: m.OrderingKey}
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				t.Fatalf("no message: %v", ctx.Err())
			case <-tick.C:
			}
		}
	}
}

// clientEmail is the test service account's.
const clientEmail = "w@my-project.iam.gserviceaccount.com"

// serviceAccount is a service account key as Google gives it, with
// change applied to its members (a nil value deletes one).
func serviceAccount(t testing.TB, privateKey string, change map[string]any) string {
	t.Helper()
	key := map[string]any{"type": "service_account", "project_id": "my-project", "private_key_id": "0123abcd",
		"private_key": privateKey, "client_email": clientEmail, "client_id": "1234567890",
		"auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": "https://oauth2.googleapis.com/token",
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
		"client_x509_cert_url":        "https://www.googleapis.com/robot/v1/metadata/x509/w%40my-project.iam.gserviceaccount.com",
		"universe_domain":             "googleapis.com"}
	for k, v := range change {
		if v == nil {
			delete(key, k)
			continue
		}
		key[k] = v
	}
	b, err := json.Marshal(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rsaKey is a new 2,048-bit RSA key, as PKCS #8 PEM and its public key.
func rsaKey(t testing.TB) (string, *rsa.PublicKey) {
	t.Helper()
	return rsaPEM(t, 2048)
}

// rsaPEM is a new PKCS #8 PEM RSA key of bits and its public key.
func rsaPEM(t testing.TB, bits int) (string, *rsa.PublicKey) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), &k.PublicKey
}
