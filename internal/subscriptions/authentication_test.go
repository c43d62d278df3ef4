package subscriptions

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/testfixtures/testpki"
	"github.com/webhookd/webhookd/signer"
)

func ptr(s string) *string { return &s }

// TestCheckAuthentication: each fault names its own field; a good mtls
// authentication is summarised without its key.
func TestCheckAuthentication(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca := testpki.NewCA(t, "merchant CA")
	good := ca.Client(t, "webhookd-client", now.Add(-time.Hour), now.Add(30*24*time.Hour))
	other := ca.Client(t, "other", now.Add(-time.Hour), now.Add(30*24*time.Hour))
	expired := ca.Client(t, "expired", now.Add(-48*time.Hour), now.Add(-time.Hour))
	future := ca.Client(t, "future", now.Add(time.Hour), now.Add(48*time.Hour))
	mtls := func(cert, key, serverCA *string) AuthenticationInput {
		return AuthenticationInput{Type: ptr(AuthenticationMTLS), ClientCertificate: cert, ClientKey: key, ServerCA: serverCA}
	}
	bigCert, bigKey := oversized(t)
	for _, tc := range []struct {
		name      string
		in        AuthenticationInput
		wantParam string
		wantRule  string
	}{
		{"no type", AuthenticationInput{ClientCertificate: &good.CertPEM}, "authentication.type", invalid.RuleMissing},
		{"unknown type", AuthenticationInput{Type: ptr("basic")}, "authentication.type", "authentication_type_unknown"},
		{"no certificate", mtls(nil, &good.KeyPEM, nil), "authentication.client_certificate", invalid.RuleMissing},
		{"no key", mtls(&good.CertPEM, nil, nil), "authentication.client_key", invalid.RuleMissing},
		{"certificate not PEM", mtls(ptr("MIIB..."), &good.KeyPEM, nil), "authentication.client_certificate", "pem_invalid"},
		{"certificate is a key", mtls(&good.KeyPEM, &good.KeyPEM, nil), "authentication.client_certificate", "pem_invalid"},
		{"certificate with trailing text", mtls(ptr(good.CertPEM+"junk"), &good.KeyPEM, nil), "authentication.client_certificate", "pem_invalid"},
		{"certificate not DER", mtls(ptr(pemOf("CERTIFICATE", "garbage")), &good.KeyPEM, nil), "authentication.client_certificate", "certificate_invalid"},
		{"expired certificate", mtls(&expired.CertPEM, &expired.KeyPEM, nil), "authentication.client_certificate", "certificate_expired"},
		{"certificate not yet valid", mtls(&future.CertPEM, &future.KeyPEM, nil), "authentication.client_certificate", "certificate_not_yet_valid"},
		{"key of another certificate", mtls(&good.CertPEM, &other.KeyPEM, nil), "authentication.client_certificate", "certificate_key_mismatch"},
		{"key not PEM", mtls(&good.CertPEM, ptr("secret"), nil), "authentication.client_key", "pem_invalid"},
		{"key is a certificate", mtls(&good.CertPEM, &good.CertPEM, nil), "authentication.client_key", "pem_invalid"},
		{"key not DER", mtls(&good.CertPEM, ptr(pemOf("PRIVATE KEY", "garbage")), nil), "authentication.client_key", "private_key_invalid"},
		{"server CA not PEM", mtls(&good.CertPEM, &good.KeyPEM, ptr("ca")), "authentication.server_ca", "pem_invalid"},
		{"server CA too long", mtls(&good.CertPEM, &good.KeyPEM, ptr(strings.Repeat(ca.PEM, 200))), "authentication.server_ca", "pem_too_long"},
		{"a chain of six certificates", mtls(ptr(good.CertPEM+strings.Repeat(ca.PEM, 5)), &good.KeyPEM, nil),
			"authentication.client_certificate", "certificate_chain_too_long"},
		{"a server CA of six certificates", mtls(&good.CertPEM, &good.KeyPEM, ptr(strings.Repeat(ca.PEM, 6))),
			"authentication.server_ca", "certificate_chain_too_long"},
		{"a certificate of a 4,608-bit RSA key", mtls(&bigCert, &bigKey, nil), "authentication.client_certificate", "key_size"},
		{"a 4,608-bit RSA key", mtls(&good.CertPEM, &bigKey, nil), "authentication.client_key", "key_size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := checkAuthentication("authentication", tc.in, now)
			bad := invalid.As(err)
			if bad == nil || bad.Param != tc.wantParam || bad.Rule != tc.wantRule {
				t.Fatalf("error %v, want %s on %s", err, tc.wantRule, tc.wantParam)
			}
			if strings.Contains(bad.Message, good.KeyPEM[30:60]) {
				t.Fatalf("message quotes the key: %s", bad.Message)
			}
		})
	}

	a, summary, err := checkAuthentication("authentication", mtls(&good.CertPEM, &good.KeyPEM, &ca.PEM), now)
	if err != nil {
		t.Fatal(err)
	}
	if summary.Type != "mtls" || summary.Subject != "CN=webhookd-client,O=webhookd tests" || summary.Issuer != "CN=merchant CA" ||
		summary.Serial != good.Cert.SerialNumber.String() || !summary.NotAfter.Equal(good.Cert.NotAfter) || !summary.ServerCA {
		t.Fatalf("summary %+v", summary)
	}
	for _, shown := range []string{a.String(), fmt.Sprintf("%v %+v %#v", a, a, a)} {
		if strings.Contains(shown, "PRIVATE") {
			t.Fatalf("printed authentication shows its key: %s", shown)
		}
	}
}

// TestSealedAuthenticationOpens: what is sealed opens to a client
// certificate and a pool of the server CA.
func TestSealedAuthenticationOpens(t *testing.T) {
	t.Parallel()
	sealer, err := signer.NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	ca := testpki.NewCA(t, "merchant CA")
	client := ca.ValidClient(t, "c")
	a, summary, err := checkAuthentication("authentication", AuthenticationInput{Type: ptr("mtls"),
		ClientCertificate: &client.CertPEM, ClientKey: &client.KeyPEM, ServerCA: &ca.PEM}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	stored, err := sealAuthentication(sealer, a, summary)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored.Sealed), "PRIVATE KEY") {
		t.Fatal("the sealed authentication holds the key in clear")
	}
	opened, err := OpenAuthentication(sealer, stored.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := opened.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ct.Certificate.Leaf.Verify(x509.VerifyOptions{Roots: ct.ServerCA,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("opened certificate does not chain to the opened server CA (the same CA here): %v", err)
	}
}

func pemOf(kind, der string) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: []byte(der)}))
}

// FuzzCheckAuthentication: whatever a merchant sends, the check never
// panics, refuses with an error naming a field of authentication, and
// never quotes the key in its message.
func FuzzCheckAuthentication(f *testing.F) {
	ca := testpki.NewCA(f, "fuzz CA")
	good := ca.ValidClient(f, "fuzz")
	f.Add("mtls", good.CertPEM, good.KeyPEM, ca.PEM)
	f.Add("mtls", good.CertPEM, good.KeyPEM, "")
	f.Add("mtls", good.CertPEM[:len(good.CertPEM)/2], good.KeyPEM, "")
	f.Add("mtls", pemOf("CERTIFICATE", "\x30\x82"), pemOf("EC PRIVATE KEY", "\x30"), pemOf("CERTIFICATE", ""))
	f.Add("mtls", good.CertPEM+strings.Repeat(ca.PEM, 5), good.KeyPEM, strings.Repeat(ca.PEM, 6))
	f.Add("oauth2", "", "", "")
	f.Fuzz(func(t *testing.T, typ, cert, key, serverCA string) {
		in := AuthenticationInput{Type: &typ, ClientCertificate: &cert, ClientKey: &key, ServerCA: &serverCA}
		a, _, err := checkAuthentication("authentication", in, time.Now())
		if err != nil {
			bad := invalid.As(err)
			if bad == nil || !strings.HasPrefix(bad.Param, "authentication.") {
				t.Fatalf("error %v does not name a field of authentication", err)
			}
			if len(key) > 8 && strings.Contains(bad.Message, key) {
				t.Fatalf("message quotes the key: %s", bad.Message)
			}
			return
		}
		if _, err := a.ClientTLS(); err != nil {
			t.Fatalf("accepted an authentication that does not open to a client certificate: %v", err)
		}
	})
}

// oversized is the 4,608-bit RSA key of keybounds' testdata and its
// self-signed certificate (made once with openssl: generating one takes
// seconds).
func oversized(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	cert, err := os.ReadFile("../keybounds/testdata/rsa4608.crt")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile("../keybounds/testdata/rsa4608.pem")
	if err != nil {
		t.Fatal(err)
	}
	return string(cert), string(key)
}

// TestClientTLSRefusesOldValues: an mtls authentication stored by an
// older build with a key or a chain beyond the bounds is refused when an
// attempt opens it, its error ErrAuthenticationInvalid and the rule, and
// never used; one within them opens.
func TestClientTLSRefusesOldValues(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca := testpki.NewCA(t, "merchant CA")
	good := ca.Client(t, "webhookd-client", now.Add(-time.Hour), now.Add(30*24*time.Hour))
	bigCert, bigKey := oversized(t)
	for _, tc := range []struct {
		name  string
		a     Authentication
		param string // "" opens
		rule  string
	}{
		{"within the bounds", Authentication{Type: AuthenticationMTLS, ClientCertificate: good.CertPEM, ClientKey: good.KeyPEM, ServerCA: ca.PEM}, "", ""},
		{"a 4,608-bit RSA key", Authentication{Type: AuthenticationMTLS, ClientCertificate: bigCert, ClientKey: bigKey},
			"authentication.client_key", "key_size"},
		{"a chain of six", Authentication{Type: AuthenticationMTLS, ClientCertificate: good.CertPEM + strings.Repeat(ca.PEM, 5), ClientKey: good.KeyPEM},
			"authentication.client_certificate", "certificate_chain_too_long"},
		{"a server CA of six", Authentication{Type: AuthenticationMTLS, ClientCertificate: good.CertPEM, ClientKey: good.KeyPEM, ServerCA: strings.Repeat(ca.PEM, 6)},
			"authentication.server_ca", "certificate_chain_too_long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.a.ClientTLS()
			if tc.param == "" {
				if err != nil || out.ServerCA == nil {
					t.Fatalf("ClientTLS = %+v, %v", out, err)
				}
				return
			}
			bad := invalid.As(err)
			if !errors.Is(err, ErrAuthenticationInvalid) || bad == nil || bad.Param != tc.param || bad.Rule != tc.rule {
				t.Fatalf("ClientTLS = %v, want ErrAuthenticationInvalid and %s on %s", err, tc.rule, tc.param)
			}
		})
	}
}

// FuzzCheckOAuth2PrivateKey: whatever private_key an
// oauth2_client_credentials authentication holds, checking it answers
// with a fault of authentication.private_key that never quotes it, or
// credentials that validate again when an attempt opens them (the key
// within keybounds both times).
func FuzzCheckOAuth2PrivateKey(f *testing.F) {
	ca := testpki.NewCA(f, "fuzz CA")
	good := ca.ValidClient(f, "fuzz")
	f.Add(good.KeyPEM)
	f.Add(pemOf("RSA PRIVATE KEY", "garbage"))
	f.Add(pemOf("PRIVATE KEY", string(make([]byte, 4000))))
	f.Add("-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n")
	c := newChecker(Rules{})
	f.Fuzz(func(t *testing.T, privateKey string) {
		typ := AuthenticationOAuth2
		in := AuthenticationInput{Type: &typ, TokenURL: ptr("https://auth.example.com/token"), ClientID: ptr("webhookd"), PrivateKey: &privateKey}
		a, _, err := c.authentication("authentication", in)
		if err != nil {
			bad := invalid.As(err)
			if bad == nil || !strings.HasPrefix(bad.Param, "authentication.") {
				t.Fatalf("error %v does not name a field of authentication", err)
			}
			if len(privateKey) > 8 && strings.Contains(bad.Message, privateKey) {
				t.Fatalf("message quotes the key: %s", bad.Message)
			}
			return
		}
		creds, err := a.OAuth2Credentials()
		if err != nil || creds.Validate() != nil {
			t.Fatalf("checked oauth2 credentials do not validate again: %v", err)
		}
	})
}
