package deliver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// destinations sends every attempt through the destination registry:
// the registry's pool chooses the subscription's kind (its stored
// destination's, else the built-in kind its own kind chooses: the HTTP
// endpoint, the listener) and the attempt is that kind's Send of one
// message, signed here for every kind alike.
type destinations struct {
	pool    *destination.Pool
	version string
	clock   clock.Clock
}

// newDestinations is the sending side of a worker: cfg's kinds with the
// engine's built-in kinds added (builtin: the HTTP endpoint on the
// sender, the listener on the relay, poll), its dialer (through its
// egress proxy when set) and timeout.
func newDestinations(cfg SenderConfig, dialer *net.Dialer, sealer *signer.Sealer, clk clock.Clock, builtin ...destination.Kind) (*destinations, error) {
	if dialer == nil {
		dialer = NewDialer(cfg)
	}
	dial := dialer.DialContext
	if cfg.EgressProxy != nil {
		dial = egressDialing(cfg, dialer).DialContext
	}
	kinds := cfg.Kinds
	if kinds == nil {
		// No kind registered: a stored destination of any kind fails as
		// one this build does not deliver.
		kinds, _ = destination.NewRegistry()
	}
	kinds, err := kinds.WithBuiltin(builtin...)
	if err != nil {
		return nil, fmt.Errorf("destinations: %w", err)
	}
	pool, err := destination.NewPool(destination.PoolConfig{
		Registry: kinds,
		Unseal: func(sealed []byte) ([]byte, error) {
			plain, err := sealer.Open(sealed)
			return []byte(plain), err
		},
		Env:            destination.Env{Dial: dial, Timeout: cfg.Timeout, Clock: clk, Version: cfg.Version},
		AllowPlaintext: cfg.AllowHTTP,
	})
	if err != nil {
		return nil, fmt.Errorf("destinations: %w", err)
	}
	return &destinations{pool: pool, version: cfg.Version, clock: clk}, nil
}

// forget closes the publisher of a subscription that was deleted or
// disabled.
func (ds *destinations) forget(subscriptionID uuid.UUID) { ds.pool.Forget(subscriptionID) }

// closeAll closes every publisher.
func (ds *destinations) closeAll() { ds.pool.Close() }

// outgoing is what one attempt sends, before it is signed.
type outgoing struct {
	// leased is the attempt's delivery (a batch's first).
	leased *store.LeasedDelivery
	// id is the webhook-id: the event's id, or a batch's.
	id string
	// body is the payload as stored (the envelope as shaped, or a
	// batch's); the signing may encrypt it.
	body []byte
	// url is where an HTTP endpoint's request goes.
	url string
	// custom are the subscription's own headers (as its transformation
	// left them).
	custom map[string]string
	// ordering are an ordered delivery's headers, or a batch's size.
	ordering http.Header
	// size is how many deliveries the body holds.
	size int
}

// outgoingOf is the attempt of one delivery: its body as leased, to its
// url, with custom headers.
func outgoingOf(leased *store.LeasedDelivery, custom map[string]string) outgoing {
	return outgoing{leased: leased, id: leased.EventID.String(), body: leased.Body, url: leased.URL, custom: custom,
		ordering: orderingHeaders(leased.Delivery), size: 1}
}

// send makes o's attempt: the publisher the registry chooses for its
// subscription, sent the message signed. An error is internal (the
// signing or the destination could not be opened): nothing was sent.
func (ds *destinations) send(ctx context.Context, o outgoing, sig Signing, credentials any) (Result, error) {
	pub, err := ds.pool.For(subjectOf(o.leased))
	if err != nil {
		return Result{}, err
	}
	m, err := ds.message(o, sig, ds.clock.Now())
	if err != nil {
		return Result{}, err
	}
	m.Credentials = credentials
	sent, err := pub.Send(ctx, m)
	if err != nil {
		return Result{}, err
	}
	return fromKind(sent), nil
}

// subjectOf is the subscription of leased as the registry chooses for it.
func subjectOf(l *store.LeasedDelivery) destination.Subject {
	return destination.Subject{ID: l.SubscriptionID, MerchantID: l.MerchantID, Kind: string(l.Kind), Sealed: l.SealedDestination}
}

// message is o as every kind is sent it: the body encrypted when the
// subscription has a key, and the headers of an HTTP delivery, the
// subscription's first so that ours win, signed at signedAt.
func (ds *destinations) message(o outgoing, sig Signing, signedAt time.Time) (destination.Message, error) {
	body, contentType, err := sig.payload(o.body)
	if err != nil {
		return destination.Message{}, err
	}
	h := make(http.Header, len(o.custom)+len(o.ordering)+6)
	for name, value := range o.custom {
		h.Set(name, value)
	}
	h.Set("Content-Type", contentType)
	h.Set("User-Agent", "webhookd/"+ds.version)
	signer.SetHeadersWith(h, o.id, signedAt, body, sig.Keys...)
	for name, values := range o.ordering {
		h[name] = values
	}
	l := o.leased
	m := destination.Message{DeliveryID: l.ID.String(), EventID: o.id, EventType: l.EventType, Body: body, ContentType: contentType,
		Header: h, Custom: o.custom, URL: o.url, SignedAt: signedAt, Size: o.size, Subject: subjectOf(l)}
	if o.size > 1 {
		m.EventType = ""
	}
	if l.Sequence != nil && l.OrderingKey != nil {
		m.OrderingKey = *l.OrderingKey
	}
	return m, nil
}

// fromKind is a kind's Result as the attempt's.
func fromKind(r destination.Result) Result {
	return Result{Started: r.Started, Finished: r.Finished, Duration: r.Duration, HTTPStatus: r.Status, ErrCode: r.Code,
		Body: r.Answer, Headers: r.Sent, outcome: r.Outcome, retryAfter: r.RetryAfter, final: r.Final, cause: r.Cause}
}

// toKind is an attempt's Result as a built-in kind answers it.
func toKind(r Result) destination.Result {
	return destination.Result{Started: r.Started, Finished: r.Finished, Duration: r.Duration, Status: r.HTTPStatus, Code: r.ErrCode,
		Answer: r.Body, Sent: r.Headers, Outcome: r.outcome, RetryAfter: r.retryAfter, Final: r.final, Cause: r.cause}
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
