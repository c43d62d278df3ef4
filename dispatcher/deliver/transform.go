package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/transform"
)

// Attempt error codes of transformations (docs/transformations.md).
const (
	// errTransformation is a transformation that failed: it threw, went
	// past a limit or returned a wrong shape. The attempt is retried on
	// the schedule, so that the merchant can fix the code meanwhile; its
	// metric outcome is blocked (DESIGN.md's five outcomes: nothing was
	// sent, as for a target refused before dialing).
	errTransformation = "transformation_error"
	// errTransformationCancelled is a delivery the transformation
	// cancelled: it ends skipped, nothing sent.
	errTransformationCancelled = "transformation_cancelled"
)

// Transformer runs subscriptions' transformations: the version an
// attempt leased, its code read and compiled on first use and kept.
type Transformer interface {
	// Transform runs version of subscriptionID's transformation on in.
	// A *transform.Error is the merchant's code failing, told to them;
	// any other error is internal (the code could not be read).
	Transform(ctx context.Context, subscriptionID uuid.UUID, version int, in transform.Input) (transform.Output, error)
}

// transforming runs an attempt's transformation, before its send.
type transforming struct {
	// transformer is nil on a worker given no sandbox.
	transformer Transformer
	clock       clock.Clock
	// turns holds each merchant to one transformation at a time.
	turns *merchantTurns
}

// shaped is what an attempt sends once its transformation ran.
type shaped struct {
	// body, target and headers replace the delivery's.
	body    []byte
	target  string
	headers map[string]string
	// version is the transformation's version that ran.
	version int
}

// transformed runs the attempt's transformation on what it would send
// (body, its endpoint's URL, its custom headers). ended, when not nil, is
// the attempt's result without sending: the transformation cancelled the
// delivery or failed. An error is internal: nothing was sent.
func (r transforming) transformed(ctx context.Context, leased store.LeasedDelivery, headers map[string]string) (out shaped, ended *Result, err error) {
	version := *leased.TransformationVersion
	started := r.clock.Now()
	if headers == nil {
		headers = map[string]string{} // the handler adds to it
	}
	payload, err := envelopePayload(leased.Body)
	if err != nil {
		return shaped{}, nil, err
	}
	in := transform.Input{EventType: leased.EventType, Payload: payload, Headers: headers}
	httpEndpoint := leased.SealedDestination == nil && leased.Kind != store.KindListener
	if httpEndpoint {
		in.URL = leased.URL
	}
	if r.transformer == nil {
		return shaped{}, nil, errors.New("transformation: no transformer configured")
	}
	release, err := r.turns.take(ctx, leased.MerchantID)
	if err != nil {
		return shaped{}, nil, err
	}
	got, err := r.transformer.Transform(ctx, leased.SubscriptionID, version, in)
	release()
	var failed *transform.Error
	if err != nil && !errors.As(err, &failed) {
		return shaped{}, nil, err
	}
	finish := func(outcome, code, said string) (shaped, *Result, error) {
		res := Result{Started: started, Finished: r.clock.Now(), ErrCode: &code, outcome: outcome,
			transformation: &version, skipped: code == errTransformationCancelled}
		res.Duration = res.Finished.Sub(started)
		res.Body = printable([]byte(truncate(code+": "+said, maxResponseBody)))
		return shaped{}, &res, nil
	}
	if failed != nil {
		return finish(metrics.OutcomeBlocked, errTransformation, failed.Error())
	}
	if got.Cancel {
		// Not an attempt to deliver: webhookd_delivery_attempts_total
		// does not count it (attempt.go), whatever its outcome says.
		return finish(metrics.OutcomeBlocked, errTransformationCancelled, "the transformation cancelled this delivery")
	}
	// The sandbox held a changed url to the subscription URL rules (and
	// refused one for a destination); the dialer's address check applies
	// at the send, as for every URL.
	target := leased.URL
	if httpEndpoint && got.URL != "" {
		target = got.URL
	}
	return shaped{body: got.Payload, target: target, headers: got.Headers, version: version}, nil, nil
}

// TransformedPayload is what a transformation gets as its payload of a
// delivery: the payload of the envelope the delivery would send (the
// event's payload, or its thin reference).
func TransformedPayload(leased store.LeasedDelivery) (json.RawMessage, error) {
	body, err := BodyFor(leased)
	if err != nil {
		return nil, err
	}
	return envelopePayload(body)
}

// envelopePayload is the payload member of an envelope as sent.
func envelopePayload(body []byte) (json.RawMessage, error) {
	var env struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("transformation: read the envelope: %w", err)
	}
	if env.Payload == nil {
		env.Payload = json.RawMessage("null")
	}
	return env.Payload, nil
}

// merchantTurns lets each merchant run one transformation at a time in
// this process: a script spinning at its CPU limit then takes at most one
// core from the others, whatever share of the worker's slots its
// merchant holds. The wait counts in the attempt's time, against its own
// merchant's share.
type merchantTurns struct {
	mu   sync.Mutex
	held map[string]*merchantTurn
}

// merchantTurn is one merchant's turn: its token, and how many attempts
// hold or wait for it (the entry goes when none does).
type merchantTurn struct {
	token chan struct{}
	users int
}

// take waits for merchant's turn, as long as ctx allows; release gives it
// back.
func (m *merchantTurns) take(ctx context.Context, merchant string) (release func(), err error) {
	m.mu.Lock()
	if m.held == nil {
		m.held = map[string]*merchantTurn{}
	}
	t := m.held[merchant]
	if t == nil {
		t = &merchantTurn{token: make(chan struct{}, 1)}
		m.held[merchant] = t
	}
	t.users++
	m.mu.Unlock()
	leave := func() {
		m.mu.Lock()
		if t.users--; t.users == 0 {
			delete(m.held, merchant)
		}
		m.mu.Unlock()
	}
	select {
	case t.token <- struct{}{}:
		return func() { <-t.token; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}
