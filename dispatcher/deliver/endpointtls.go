package deliver

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// EndpointTLS is the client certificate an attempt presents to its
// endpoint (a subscription's mtls authentication), not yet opened: the
// sender opens it only when it keeps no transport for its Version, so
// that an attempt costs neither a decryption nor a parse.
type EndpointTLS struct {
	// Version names the subscription and the authentication as stored;
	// it changes when the merchant sets another one.
	Version string
	sealed  []byte
	sealer  *signer.Sealer
}

// open opens and parses the certificate, its key and the server CA.
func (e *EndpointTLS) open() (subscriptions.ClientTLS, error) {
	a, err := subscriptions.OpenAuthentication(e.sealer, e.sealed)
	if err != nil {
		return subscriptions.ClientTLS{}, err
	}
	return a.ClientTLS()
}

// EndpointTLS is the client certificate of a leased delivery's
// subscription; nil when it has no mtls authentication (none, or another
// type). It comes with the lease's row, so it costs no query.
func (c *SecretCache) EndpointTLS(l store.LeasedDelivery) *EndpointTLS {
	if l.SealedAuthentication == nil || l.AuthenticationType != subscriptions.AuthenticationMTLS {
		return nil
	}
	// A new authentication is sealed with a new nonce: its digest is new
	// even when the certificate is the same, and the digest alone is
	// enough to tell versions apart.
	sum := sha256.Sum256(l.SealedAuthentication)
	return &EndpointTLS{Version: l.SubscriptionID.String() + "/" + hex.EncodeToString(sum[:16]),
		sealed: l.SealedAuthentication, sealer: c.sealer}
}
