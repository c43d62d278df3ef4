package receiver_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/signer"
)

// BenchmarkVerify is the cost of checking one delivery of a 1 KiB body,
// with one secret and with two (a rotation on the receiver's side).
func BenchmarkVerify(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	now := time.Unix(1795000000, 0)
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprint(n, " secrets"), func(b *testing.B) {
			secrets := make([]string, n)
			for i := range secrets {
				secrets[i], _ = signer.NewSecret()
			}
			key, _ := signer.ParseSecret(secrets[0]) // the last one tried matches
			sig := signer.Sign("e1", now, body, key)
			v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: append(secrets[1:], secrets[0]), Now: at(now)})
			if err != nil {
				b.Fatal(err)
			}
			ts := strconv.FormatInt(now.Unix(), 10)
			b.ReportAllocs()
			for b.Loop() {
				if err := v.VerifyValues("e1", ts, sig, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReceiver is one delivery through the http.Handler, without the
// network: read, verify, decode, claim, handle, complete, answer.
func BenchmarkReceiver(b *testing.B) {
	secret, _ := signer.NewSecret()
	key, _ := signer.ParseSecret(secret)
	now := time.Unix(1795000000, 0)
	v, _ := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{secret}, Now: at(now)})
	dedup, _ := receiver.NewMemoryDeduplicator(receiver.MemoryDeduplicatorConfig{Now: at(now), MaxEntries: 10_000})
	rc, err := receiver.New(receiver.Config{Verifier: v, Dedup: dedup, Logger: slog.New(slog.DiscardHandler),
		Handler: receiver.HandlerFunc(func(context.Context, *receiver.Event) error { return nil })})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		id := strconv.Itoa(i)
		body := envelope(id)
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		signer.SetHeaders(req.Header, id, now, body, key)
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}
