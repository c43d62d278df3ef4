package jwe_test

import (
	"bytes"
	"context"
	"crypto"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/receiver/jwe"
)

const (
	secret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	eventID = "0195d1f4-9c1e-7c55-a1f2-3b4c5d6e7f80"
)

// countingDecrypter counts the decryptions the receiver asks for, to show
// that an unverified body never gets one.
type countingDecrypter struct {
	*jwe.Decrypter
	calls atomic.Int64
}

func (c *countingDecrypter) Decrypt(body []byte) ([]byte, error) {
	c.calls.Add(1)
	return c.Decrypter.Decrypt(body)
}

// TestReceiverVerifiesThenDecrypts runs receiver.New with a Decrypter
// behind a real HTTP server: the signature is checked over the JWE as
// sent, and only a verified body is decrypted.
func TestReceiverVerifiesThenDecrypts(t *testing.T) {
	t.Parallel()
	k, other := newKeys(t), newKeys(t)
	key, err := receiver.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	dec := &countingDecrypter{Decrypter: newDecrypter(t, jwe.Config{Keys: []crypto.PrivateKey{k.rsa, k.ec}})}
	var mu sync.Mutex
	var handled []*receiver.Event
	rc, err := receiver.New(receiver.Config{
		Verifier:  v,
		Decrypter: dec,
		Handler: receiver.HandlerFunc(func(_ context.Context, ev *receiver.Event) error {
			mu.Lock()
			defer mu.Unlock()
			handled = append(handled, ev)
			return nil
		}),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)

	rsaBody := encrypt(t, jwe.RSAOAEP256, jose.A256GCM, &k.rsa.PublicKey, "", nil)
	ecBody := encrypt(t, jwe.ECDHESA256KW, jose.A256GCM, &k.ec.PublicKey, "", nil)
	otherBody := encrypt(t, jwe.ECDHESA256KW, jose.A256GCM, &other.ec.PublicKey, "", nil)
	for _, tc := range []struct {
		name       string
		body       []byte
		signed     []byte // what the signature covers
		sigKey     receiver.Key
		status     int
		answer     string
		decrypted  bool // whether the Decrypter was asked
		handledNow bool
	}{
		{"RSA JWE signed as sent", rsaBody, rsaBody, key, 200, "ok", true, true},
		{"EC JWE signed as sent", ecBody, ecBody, key, 200, "ok", true, true},
		{"JWE with the plaintext's signature", ecBody, []byte(envelope), key, 401, "no matching signature", false, false},
		{"JWE signed with another secret", ecBody, ecBody, receiver.Key("not the endpoint's secret"), 401, "no matching signature", false, false},
		{"signed JWE to another key", otherBody, otherBody, key, 400, "body could not be decrypted", true, false},
		{"signed plaintext", []byte(envelope), []byte(envelope), key, 400, "body could not be decrypted", true, false},
	} {
		before, handledBefore := dec.calls.Load(), len(handled)
		ts := receiver.FormatTimestamp(time.Now())
		req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("content-type", jwe.ContentType)
		req.Header.Set(receiver.HeaderID, eventID)
		req.Header.Set(receiver.HeaderTimestamp, ts)
		req.Header.Set(receiver.HeaderSignature, receiver.Signature(eventID, ts, tc.signed, tc.sigKey))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || strings.TrimSpace(string(answer)) != tc.answer {
			t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, answer, tc.status, tc.answer)
		}
		if got := dec.calls.Load() > before; got != tc.decrypted {
			t.Errorf("%s: decrypted %v, want %v", tc.name, got, tc.decrypted)
		}
		mu.Lock()
		if got := len(handled) > handledBefore; got != tc.handledNow {
			t.Errorf("%s: handled %v, want %v", tc.name, got, tc.handledNow)
		} else if got && (handled[len(handled)-1].ID != eventID || !strings.Contains(string(handled[len(handled)-1].Payload), `"po_1"`)) {
			t.Errorf("%s: handled %+v", tc.name, handled[len(handled)-1])
		}
		mu.Unlock()
	}
}
