package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store"
)

// errListenerClosed is the attempt error of a delivery whose listener
// ended.
const errListenerClosed = listener.ClosedError

// localErrors are the error codes a command may report for its local
// exchange; anything else is recorded as network_error.
var localErrors = []string{errTimeout, errConnectionRefused, errTLS, errDNS, errNetwork}

// listenerStore is what the relay needs of the database.
type listenerStore interface {
	// ListenerExpiry tells when a listener ends, or that it has ended.
	ListenerExpiry(ctx context.Context, id uuid.UUID) (expiresAt time.Time, ended bool, err error)
	// EndListener ends an expired listener and stops its other pending
	// deliveries.
	EndListener(ctx context.Context, merchantID string, id uuid.UUID, now time.Time, reason string) (bool, error)
}

// relayConfig is what the relay needs.
type relayConfig struct {
	// Redis carries the deliveries to the API process holding the
	// listener's connection and the answers back (required).
	Redis redis.UniversalClient
	// Store tells whether a listener still lives (required).
	Store listenerStore
	// Timeout bounds one exchange, as for a dialled delivery (required).
	Timeout time.Duration
	// Version names this build in the user-agent header (required).
	Version string
}

func (c relayConfig) validate() error {
	switch {
	case c.Redis == nil || c.Store == nil:
		return errors.New("relay: Redis and Store are required")
	case c.Timeout <= 0:
		return errors.New("relay: Timeout must be positive")
	case c.Version == "":
		return errors.New("relay: Version is required")
	}
	return nil
}

// relay makes the exchange of an attempt for a listener subscription: it
// never dials. It pushes the signed request to the listener's Redis list,
// where the API process holding the listener's WebSocket takes it when
// the publish on the listener's channel that goes with the push wakes it,
// and
// waits for the command's answer on a key of its own, as long as a
// dialled exchange may last. A listener that has ended gets no request: its
// attempt fails for good with listener_closed.
type relay struct {
	cfg   relayConfig
	clock clock.Clock
}

func newRelay(cfg relayConfig, clock clock.Clock) (*relay, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &relay{cfg: cfg, clock: clock}, nil
}

// exchange makes the attempt's exchange: the message of its delivery
// (as its transformation, when one is turned on, shaped it), sent by the
// kind the registry chooses for its subscription.
func (r *Runner) exchange(ctx context.Context, leased store.LeasedDelivery, sig Signing) (Result, error) {
	body, err := BodyFor(leased)
	if err != nil {
		return Result{}, err
	}
	leased.Body = body // thin.go: the body as sent, which is signed
	extra, err := r.secrets.Headers(leased)
	if err != nil {
		return Result{}, err
	}
	var transformed *shaped
	if leased.TransformationVersion != nil {
		out, ended, err := r.transforms.transformed(ctx, leased, extra)
		if err != nil || ended != nil {
			return deref(ended), err
		}
		leased.Body, leased.URL, extra = out.body, out.target, out.headers
		transformed = &out
	}
	res, err := r.destinations.send(ctx, outgoingOf(&leased, extra), sig, r.secrets.credentials(&leased))
	if transformed != nil {
		sent := printable(transformed.body)
		res.transformation, res.sentBody = &transformed.version, &sent
	}
	return res, err
}

// deref is *res, or the zero Result for nil.
func deref(res *Result) Result {
	if res == nil {
		return Result{}
	}
	return *res
}

// Send relays one attempt's message (the listener kind's send,
// internal/destination/listen) and returns the command's answer as its
// result. An error is internal (Postgres or Redis unreachable): the
// attempt is made again later.
func (r *relay) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	res, err := r.send(ctx, m)
	return toKind(res), err
}

// send relays one attempt and returns the command's answer as its result.
// An error is internal (Postgres or Redis unreachable): the attempt is made
// again later.
func (r *relay) send(ctx context.Context, m destination.Message) (Result, error) {
	started := r.clock.Now()
	res := Result{Started: started}
	finish := func(outcome, code string) (Result, error) {
		res.Finished = r.clock.Now()
		if res.Duration == 0 {
			res.Duration = res.Finished.Sub(started)
		}
		res.outcome = outcome
		if code != "" {
			res.ErrCode = &code
		}
		return res, nil
	}
	sub := m.Subject
	expiresAt, ended, err := r.cfg.Store.ListenerExpiry(ctx, sub.ID)
	if err != nil {
		return Result{}, err
	}
	if ended || !expiresAt.After(started) {
		// Its connection is gone for longer than the grace: end it, so
		// that its other deliveries stop too, and send nothing.
		if _, err := r.cfg.Store.EndListener(ctx, sub.MerchantID, sub.ID, started, errListenerClosed); err != nil {
			return Result{}, err
		}
		res.final = true
		return finish(metrics.OutcomeBlocked, errListenerClosed)
	}

	// Signed as a dialled attempt is, the body as relayed, of either
	// scheme (destinations.message).
	headers := make(map[string]string, len(m.Header))
	for k := range m.Header {
		headers[strings.ToLower(k)] = m.Header.Get(k)
	}
	d := listener.Delivery{Type: listener.TypeDelivery, ID: uuid.NewString(), EventID: m.EventID,
		EventType: m.EventType, Headers: headers, Body: string(m.Body), Deadline: started.Add(r.cfg.Timeout)}
	msg, err := json.Marshal(d)
	if err != nil {
		return Result{}, fmt.Errorf("relay: encode delivery: %w", err)
	}
	key := listener.DeliveriesKey(sub.ID)
	pipe := r.cfg.Redis.TxPipeline()
	pipe.RPush(ctx, key, msg)
	// A list nobody takes from (its connection gone) expires on its own.
	pipe.Expire(ctx, key, 2*r.cfg.Timeout)
	// Wakes the connection, which waits on the process's shared pub/sub
	// connection rather than on the list; after the push, in the same
	// transaction, so that it finds the delivery there.
	pipe.Publish(ctx, listener.DeliveriesChannel(sub.ID), "1")
	if _, err := pipe.Exec(ctx); err != nil {
		return Result{}, fmt.Errorf("relay: push delivery: %w", err)
	}
	// Redis counts a blocking wait in whole seconds.
	wait := max(r.cfg.Timeout.Round(time.Second), time.Second)
	got, err := r.cfg.Redis.BLPop(ctx, wait, listener.AnswerKey(d.ID)).Result()
	if errors.Is(err, redis.Nil) {
		return finish(metrics.OutcomeTimeout, errTimeout)
	}
	if err != nil {
		if ctx.Err() != nil {
			return finish(metrics.OutcomeTimeout, errTimeout)
		}
		return Result{}, fmt.Errorf("relay: wait for the answer: %w", err)
	}
	var a listener.Answer
	if len(got) != 2 || json.Unmarshal([]byte(got[1]), &a) != nil {
		return finish(metrics.OutcomeNetworkError, errNetwork)
	}
	return finish(answered(&res, a))
}

// answered fills res from the command's answer and returns the attempt's
// outcome and error code.
func answered(res *Result, a listener.Answer) (outcome, code string) {
	res.Duration = time.Duration(max(a.DurationMS, 0)) * time.Millisecond
	if a.Status == 0 {
		code := a.Error
		if !slices.Contains(localErrors, code) {
			code = errNetwork
		}
		if code == errTimeout {
			return metrics.OutcomeTimeout, code
		}
		return metrics.OutcomeNetworkError, code
	}
	status := a.Status
	res.HTTPStatus = &status
	body := a.Body
	if len(body) > maxResponseBody {
		body = body[:maxResponseBody]
	}
	res.Body = printable([]byte(body))
	switch {
	case status >= 200 && status < 300:
		return metrics.OutcomeSuccess, ""
	case status >= 300 && status < 400:
		return metrics.OutcomeHTTPError, errRedirect
	default:
		return metrics.OutcomeHTTPError, errHTTPStatus
	}
}
