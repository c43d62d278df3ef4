package deliver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// destinations sends the attempts of destinations of the registry's
// kinds (internal/destination): the message signed as an HTTP delivery
// would be, through the publisher the pool keeps for the subscription.
type destinations struct {
	pool    *destination.Pool
	timeout time.Duration
	version string
	clock   clock.Clock
}

// newDestinations is the destination side of a worker: cfg's kinds, its
// dialer (through its egress proxy when set) and timeout.
func newDestinations(cfg SenderConfig, dialer *net.Dialer, sealer *signer.Sealer, clk clock.Clock) (*destinations, error) {
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
	return &destinations{pool: pool, timeout: cfg.Timeout, version: cfg.Version, clock: clk}, nil
}

// forget closes the publisher of a subscription that was deleted or
// disabled.
func (ds *destinations) forget(subscriptionID uuid.UUID) { ds.pool.Forget(subscriptionID) }

// closeAll closes every publisher.
func (ds *destinations) closeAll() { ds.pool.Close() }

// send makes a destination's attempt: the message signed as an HTTP
// delivery would be, the subscription's custom headers, the send bounded
// by the delivery timeout. An error is internal (the destination could
// not be opened): nothing was sent.
func (ds *destinations) send(ctx context.Context, leased store.LeasedDelivery, sig Signing, custom map[string]string) (Result, error) {
	started := ds.clock.Now()
	// Encrypted like an HTTP body when the subscription has a key; the
	// signature covers the message's body as sent.
	body, contentType, err := sig.payload(leased.Body)
	if err != nil {
		return Result{}, err
	}
	leased.Body = body
	pub, err := ds.pool.Publisher(leased.SubscriptionID, leased.SealedDestination)
	var refused *destination.Failure
	if err != nil && !errors.As(err, &refused) {
		return Result{}, err
	}
	res := Result{Started: started}
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, ds.timeout)
		var sent destination.Result
		sent, err = pub.Send(sctx, ds.message(leased, sig.Keys, contentType, custom, started))
		cancel()
		res.Body = printable([]byte(truncate(sent.Answer, maxResponseBody)))
	}
	res.Finished = ds.clock.Now()
	res.Duration = res.Finished.Sub(started)
	if err == nil {
		res.outcome = metrics.OutcomeSuccess
		return res, nil
	}
	code, said := destination.Classify(err)
	outcome := metrics.OutcomeNetworkError
	if errors.Is(err, context.DeadlineExceeded) {
		outcome = metrics.OutcomeTimeout
	}
	res.ErrCode, res.outcome, res.cause = &code, outcome, err
	res.Body = printable([]byte(truncate(code+": "+said, maxResponseBody)))
	return res, nil
}

// message is the attempt's message: the headers an HTTP delivery carries,
// the subscription's first so that ours win.
func (ds *destinations) message(leased store.LeasedDelivery, keys []signer.SigningKey, contentType string, custom map[string]string, signedAt time.Time) destination.Message {
	h := http.Header{}
	for name, value := range custom {
		h.Set(name, value)
	}
	h.Set("Content-Type", contentType)
	h.Set("User-Agent", "webhookd/"+ds.version)
	signer.SetHeadersWith(h, leased.EventID.String(), signedAt, leased.Body, keys...)
	for name, values := range orderingHeaders(leased.Delivery) {
		h[name] = values
	}
	headers := make(map[string]string, len(h))
	for name := range h {
		headers[strings.ToLower(name)] = h.Get(name)
	}
	m := destination.Message{DeliveryID: leased.ID.String(), EventID: leased.EventID.String(), EventType: leased.EventType,
		Body: leased.Body, ContentType: contentType, Headers: headers, SignedAt: signedAt, Size: 1}
	if leased.Sequence != nil && leased.OrderingKey != nil {
		m.OrderingKey = *leased.OrderingKey
	}
	return m
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
