package receiver_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/receiver"
)

// Verify a delivery by hand, with the test vector of the Standard Webhooks
// libraries and a clock the example moves: a real endpoint leaves
// VerifierConfig.Now nil, for time.Now.
func ExampleVerifier_Verify() {
	now := time.Unix(1614265330, 0).Add(time.Minute)
	v, err := receiver.NewVerifier(receiver.VerifierConfig{
		Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		Now:     func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	body := []byte(`{"test": 2432232314}`)

	fmt.Println(v.Verify(h, body))

	// A body altered in transit is refused.
	err = v.Verify(h, []byte(`{"test": 1}`))
	fmt.Println(errors.Is(err, receiver.ErrNoMatchingSignature))

	// The same request ten minutes later is refused: it may be a replay.
	now = now.Add(10 * time.Minute)
	err = v.Verify(h, body)
	fmt.Println(errors.Is(err, receiver.ErrTimestampTooOld))
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// true
	// receiver: timestamp too old: 11m0s behind the receiver's clock, tolerance 5m0s
}

// Verify an Ed25519 ("v1a") delivery with the subscription's public key,
// for a subscription whose signature_scheme is ed25519. The key and the
// signature are the Svix server's test vector, with the same id, timestamp
// and body as the HMAC example.
func ExampleVerifier_Verify_ed25519() {
	v, err := receiver.NewVerifier(receiver.VerifierConfig{
		PublicKeys: []string{"whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="}, // not a secret
		Now:        func() time.Time { return time.Unix(1614265330, 0) },
	})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"test": 2432232314}`)
	const sig = "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg=="
	fmt.Println(v.VerifyValues("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", sig, body))

	// A "v1" value needs the secret, which this receiver does not hold:
	// it is ignored, and without a "v1a" value nothing matches.
	err = v.VerifyValues("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", body)
	fmt.Println(errors.Is(err, receiver.ErrNoMatchingSignature))
	// Output:
	// <nil>
	// true
}

// A complete endpoint: verification, duplicate suppression and a handler.
// The second delivery of the same event is acknowledged without running
// the handler again.
func ExampleNew() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // from the subscription
	v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{secret}})
	if err != nil {
		panic(err)
	}
	dedup, err := receiver.NewMemoryDeduplicator(receiver.MemoryDeduplicatorConfig{})
	if err != nil {
		panic(err)
	}
	endpoint, err := receiver.New(receiver.Config{
		Verifier: v,
		Dedup:    dedup,
		Handler: receiver.HandlerFunc(func(ctx context.Context, ev *receiver.Event) error {
			fmt.Printf("handling %s %s: %s\n", ev.Type, ev.ID, ev.Payload)
			return nil // an error here makes webhookd retry later
		}),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(endpoint) // in production: http.Handle("/webhooks", endpoint)
	defer srv.Close()

	body := `{"id":"evt_1","type":"payout.paid","api_version":"2026-05-01","payload":{"id":"po_1","status":"paid"},"date":"2026-11-23T09:14:05.123Z"}`
	for range 2 {
		fmt.Println(deliver(srv.URL, secret, "evt_1", body))
	}
	// Output:
	// handling payout.paid evt_1: {"id":"po_1","status":"paid"}
	// 200 ok
	// 200 duplicate
}

// deliver signs and posts body as webhookd would, and returns the answer.
func deliver(url, secret, id, body string) string {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + body))
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return fmt.Sprint(resp.StatusCode, " ", strings.TrimSpace(string(answer)))
}

// Order the events of one payout: a late "sent" after "returned" is
// dropped; "sent" after "failed" means the payout must be fetched.
func ExampleGuard() {
	ctx := context.Background()
	guard, err := receiver.NewGuard(receiver.GuardConfig{Store: receiver.NewMemoryStatusStore()})
	if err != nil {
		panic(err)
	}
	handle := func(payload string) {
		ev := &receiver.Event{ID: "evt", Type: "payout.updated", Payload: []byte(payload)}
		r, err := ev.Resource()
		if err != nil {
			panic(err)
		}
		verdict, err := guard.Check(ctx, r)
		if err != nil {
			panic(err)
		}
		fmt.Println(r.Key(), r.Status, verdict)
		switch verdict {
		case receiver.Apply:
			// Update your copy of the payout, then:
			_ = guard.Record(ctx, r)
		case receiver.Fetch:
			// GET the payout from the API, update your copy, then record
			// the status the API gave:
			_ = guard.Record(ctx, receiver.Resource{Kind: r.Kind, ID: r.ID, Status: "sent"})
		case receiver.Stale:
			// Acknowledge and do nothing.
		}
	}
	handle(`{"id":"po_1","type":"payout","status":"returned"}`)
	handle(`{"id":"po_1","type":"payout","status":"sent"}`)
	handle(`{"id":"po_2","type":"payout","status":"failed"}`)
	handle(`{"id":"po_2","type":"payout","status":"sent"}`)
	// Output:
	// payout:po_1 returned apply
	// payout:po_1 sent stale
	// payout:po_2 failed apply
	// payout:po_2 sent fetch
}
