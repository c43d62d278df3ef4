package signer_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/webhookd/webhookd/signer"
)

// Signing a delivery: the header value carries one signature per active key.
func ExampleSign() {
	key, err := signer.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	sig := signer.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`), key)
	fmt.Println(sig)
	// Output: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}

// A receiver verifies the raw body before decoding it. During a rotation it
// can hold both the old and the new secret.
func ExampleVerifier_Verify() {
	v, err := signer.NewVerifier("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	body := `{"test": 2432232314}`
	req := httptest.NewRequest(http.MethodPost, "/webhooks", strings.NewReader(body))
	req.Header.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	req.Header.Set("webhook-timestamp", "1614265330")
	req.Header.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")

	// A real handler passes time.Now(); the example pins the clock to the
	// vector's timestamp plus one minute.
	now := time.Unix(1614265330, 0).Add(time.Minute)
	fmt.Println(v.Verify(req.Header, []byte(body), now))

	// The same request ten minutes later is refused: it may be a replay.
	err = v.Verify(req.Header, []byte(body), now.Add(10*time.Minute))
	fmt.Println(errors.Is(err, signer.ErrTimestampOutOfRange))

	// A body altered in transit is refused.
	err = v.Verify(req.Header, []byte(`{"test": 1}`), now)
	fmt.Println(errors.Is(err, signer.ErrNoMatchingSignature))
	// Output:
	// <nil>
	// true
	// true
}

// Rotating a secret: the store inserts Rotation.New and applies every Expiry
// in one transaction; Active then yields the keys to sign with.
func ExampleRotate() {
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	secrets := []signer.Secret{{ID: 1, Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", CreatedAt: t0}}

	now := t0.Add(time.Hour)
	r, err := signer.Rotate(secrets, now, "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
	if err != nil {
		panic(err)
	}
	for _, e := range r.Expire {
		fmt.Printf("secret %d expires at %s\n", e.ID, e.ExpiresAt.Format(time.RFC3339))
	}
	secrets = r.Apply(secrets, 2)
	for _, s := range signer.Active(secrets, now) {
		fmt.Printf("active: secret %d\n", s.ID)
	}
	// Output:
	// secret 1 expires at 2026-05-02T10:00:00Z
	// active: secret 2
	// active: secret 1
}
