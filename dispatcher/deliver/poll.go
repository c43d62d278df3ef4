package deliver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// Polled is one delivery of a poll subscription as a read gives it: the
// body an HTTP attempt would send at the same instant (thin or full,
// encrypted when the subscription has a key) and the Standard Webhooks
// headers that sign it.
type Polled struct {
	// Body is the body as signed, byte for byte.
	Body []byte
	// ContentType is application/json, or application/jose for a JWE.
	ContentType string
	// ID, Timestamp and Signature are the webhook-id, webhook-timestamp
	// and webhook-signature values.
	ID, Timestamp, Signature string
}

// PollSigning is how a read of sub's poll line signs its deliveries at
// now: the subscription's active keys, of either scheme, and its
// encryption key, as an attempt's Signing.
func (c *SecretCache) PollSigning(ctx context.Context, sub store.Subscription, now time.Time) (Signing, error) {
	return c.Signing(ctx, store.LeasedDelivery{Delivery: store.Delivery{SubscriptionID: sub.ID},
		SubscriptionVersion: sub.UpdatedAt, EncryptionKey: sub.EncryptionKey}, now)
}

// SignPolled shapes and signs one polled delivery of a subscription of
// payload style style with s, dated at: the same bytes, by the same code,
// as an HTTP attempt (BodyFor, payload, signer.SetHeadersWith), so that a
// merchant verifies what it reads as it would verify a request.
func (s Signing) SignPolled(d store.PolledDelivery, style string, at time.Time) (Polled, error) {
	if len(s.Keys) == 0 {
		return Polled{}, fmt.Errorf("sign polled delivery %s: no signing key", d.ID)
	}
	body, err := BodyFor(store.LeasedDelivery{Body: d.Envelope, PayloadStyle: style})
	if err != nil {
		return Polled{}, err
	}
	body, contentType, err := s.payload(body)
	if err != nil {
		return Polled{}, fmt.Errorf("sign polled delivery %s: %w", d.ID, err)
	}
	h := make(http.Header, 3)
	signer.SetHeadersWith(h, d.EventID.String(), at, body, s.Keys...)
	return Polled{Body: body, ContentType: contentType, ID: h.Get(signer.HeaderID),
		Timestamp: h.Get(signer.HeaderTimestamp), Signature: h.Get(signer.HeaderSignature)}, nil
}
