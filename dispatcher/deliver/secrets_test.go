package deliver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/signer"
)

// The workers cache opened secrets, but a rotation must show in the very
// next delivery: two signatures, each verifiable with its own secret alone.
func TestRotationReachesTheNextDelivery(t *testing.T) {
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(204))
	sub, oldSecret := e.Subscribe("m1", rcv.URL, "*")
	d, _ := e.Dispatcher()
	e.Run(d)

	e.Publish(d, "m1", "payout.paid")
	e.WaitFor("first delivery", 10*time.Second, func() bool { return len(rcv.Got()) == 1 })
	if sigs := strings.Fields(rcv.Got()[0].Header.Get("webhook-signature")); len(sigs) != 1 {
		t.Fatalf("before rotation: %d signatures, want 1", len(sigs))
	}

	newSecret, err := signer.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := e.Sealer.Seal(newSecret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.Subscriptions.RotateSecret(context.Background(), "m1", sub.ID, sealed, subscriptions.Rotation(newSecret)); err != nil {
		t.Fatal(err)
	}
	e.Publish(d, "m1", "payout.paid")
	e.WaitFor("second delivery", 10*time.Second, func() bool { return len(rcv.Got()) == 2 })
	got := rcv.Got()[1]
	if sigs := strings.Fields(got.Header.Get("webhook-signature")); len(sigs) != 2 {
		t.Fatalf("right after rotation: %d signatures, want 2 (old and new)", len(sigs))
	}
	for name, secret := range map[string]string{"old": oldSecret, "new": newSecret} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(got.Body, got.Header); err != nil {
			t.Errorf("the %s secret alone does not verify the delivery: %v", name, err)
		}
	}
}
