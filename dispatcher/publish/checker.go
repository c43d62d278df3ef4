package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// The cases of an endpoint check, in the order they are reported.
const (
	// CheckValid is a delivery signed as every delivery is.
	CheckValid = "valid"
	// CheckWrongSignature is signed with a secret the endpoint never had.
	CheckWrongSignature = "wrong_signature"
	// CheckStaleTimestamp is signed correctly but dated checkStaleBy ago,
	// past the 5 minutes of tolerance Standard Webhooks verifiers allow.
	CheckStaleTimestamp = "stale_timestamp"
)

// checkStaleBy is how old the stale case's timestamp is.
const checkStaleBy = 10 * time.Minute

// checkMessages are the payload messages of the check's deliveries, which
// tell whoever reads the receiver's logs what each one is for.
var checkMessages = map[string]string{
	CheckValid:          "webhookd endpoint check: correctly signed; your endpoint should accept it.",
	CheckWrongSignature: "webhookd endpoint check: wrong signature on purpose; your endpoint should refuse it.",
	CheckStaleTimestamp: "webhookd endpoint check: timestamp 10 minutes old on purpose; your endpoint should refuse it.",
}

// CheckResult is how the endpoint answered one case.
type CheckResult struct {
	Case string
	// Delivery is the test delivery recorded for the case, with its one
	// attempt.
	Delivery store.Delivery
	// HTTPStatus is the receiver's status, nil when none came back.
	HTTPStatus *int
	// Error is the attempt's error code, nil when the receiver answered 2xx.
	Error *string
	// Accepted is true when the receiver answered 2xx.
	Accepted bool
}

// CheckReport is the outcome of an endpoint check.
type CheckReport struct {
	// VerifiesSignatures is true when the endpoint accepted the valid
	// delivery and refused both bad ones.
	VerifiesSignatures bool
	// Results are in the order CheckValid, CheckWrongSignature,
	// CheckStaleTimestamp.
	Results []CheckResult
}

// checkerSubscriptions is what the Checker reads of the database's
// subscriptions: the one it checks, and the signing secrets its
// SecretCache opens.
type checkerSubscriptions interface {
	subscriptionReader
	// SigningSecrets reads a subscription's sealed secrets (SecretCache).
	SigningSecrets(ctx context.Context, subscriptionID uuid.UUID) ([]store.Secret, error)
}

// checkerEvents is what the Checker writes of the database's events.
type checkerEvents interface {
	// CreateEvent stores a case's event and its one test delivery.
	CreateEvent(ctx context.Context, e store.Event, to store.Audience) (store.Event, []store.Delivery, bool, error)
}

// checkerDeliveries is what the Checker does with the database's
// deliveries: the test deliveries it attempts and records.
type checkerDeliveries interface {
	// LeaseDeliveries takes a case's delivery for its one attempt.
	LeaseDeliveries(ctx context.Context, reqs []store.LeaseRequest, now time.Time, leaseFor time.Duration) ([]store.LeasedDelivery, []error, error)
	// RecordAttempt writes the attempt's outcome.
	RecordAttempt(ctx context.Context, r store.AttemptRecord) error
}

// Checker tests whether an endpoint verifies signatures: it sends three
// ping.test deliveries to it at once (one correctly signed, one with a
// wrong signature, one with a stale timestamp), each recorded as a test
// delivery with its attempt so that it shows in the delivery log, and
// reports how the endpoint answered each. It sends from the calling
// process, through the same sender (SSRF guard, timeout, headers) as the
// workers, so that the merchant waits for the answers.
type Checker struct {
	subscriptions checkerSubscriptions
	events        checkerEvents
	deliveries    checkerDeliveries
	publisher     *Publisher
	// sender is built at the first check, so that a process that never
	// checks holds no HTTP client for it.
	sender   func() (*deliver.Sender, error)
	secrets  *deliver.SecretCache
	clock    clock.Clock
	leaseFor time.Duration
}

// CheckerConfig is what a Checker needs; all of it is required but Dialer
// and Clock.
type CheckerConfig struct {
	Subscriptions checkerSubscriptions
	Events        checkerEvents
	Deliveries    checkerDeliveries
	Sealer        *signer.Sealer
	Publisher     *Publisher
	// Sender is how the check's deliveries are sent: as the workers send.
	Sender deliver.SenderConfig
	// Dialer, when set, dials in place of the sender's own (tests confine
	// it to loopback).
	Dialer *net.Dialer
	// LeaseFor is how long a check holds its deliveries (deliver.LeaseFor).
	LeaseFor time.Duration
	Clock    clock.Clock
}

// NewChecker builds the Checker of the API role.
func NewChecker(cfg CheckerConfig) *Checker {
	c := clock.Or(cfg.Clock)
	return &Checker{subscriptions: cfg.Subscriptions, events: cfg.Events, deliveries: cfg.Deliveries,
		publisher: cfg.Publisher, secrets: deliver.NewSecretCache(cfg.Subscriptions, cfg.Sealer),
		clock: c, leaseFor: cfg.LeaseFor,
		sender: sync.OnceValues(func() (*deliver.Sender, error) { return deliver.NewSender(cfg.Sender, c, cfg.Dialer) })}
}

// CheckEndpoint runs the three cases against the merchant's subscription, whatever
// its status (like send_test_event). A stranger's or a missing
// subscription is store.ErrNotFound and sends nothing.
func (c *Checker) CheckEndpoint(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (CheckReport, error) {
	sub, err := c.subscriptions.GetSubscription(ctx, merchantID, subscriptionID)
	if err != nil {
		return CheckReport{}, err
	}
	if sub.Destination != nil {
		// A broker takes every message, signed well or not: there is
		// no endpoint whose verification the check could test.
		return CheckReport{}, invalid.Value("destination", "endpoint_check_not_http", fmt.Sprintf(
			"The endpoint check tests an HTTP endpoint's signature verification; this subscription delivers to %s. Send a test event instead.",
			sub.Destination.Type()))
	}
	snd, err := c.sender()
	if err != nil {
		return CheckReport{}, err
	}
	cases := []string{CheckValid, CheckWrongSignature, CheckStaleTimestamp}
	results := make([]CheckResult, len(cases))
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	for i, name := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.run(ctx, snd, merchantID, subscriptionID, name)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return CheckReport{}, err
		}
	}
	return CheckReport{Results: results,
		VerifiesSignatures: results[0].Accepted && !results[1].Accepted && !results[2].Accepted}, nil
}

// run stores one case's test delivery, takes its lease at once (so that
// neither the sweeper nor a worker ever sends it: it has no task), sends
// it signed as the case wants, and records its one attempt as final.
func (c *Checker) run(ctx context.Context, snd *deliver.Sender, merchantID string, subscriptionID uuid.UUID, name string) (CheckResult, error) {
	payload, err := json.Marshal(testPayload{SubscriptionID: subscriptionID, Message: checkMessages[name]})
	if err != nil {
		return CheckResult{}, fmt.Errorf("check %s: encode payload: %w", name, err)
	}
	ev, _, err := c.publisher.newEvent(ctx, store.NewEvent{MerchantID: merchantID, Type: TestEventType, Payload: payload})
	if err != nil {
		return CheckResult{}, fmt.Errorf("check %s: %w", name, err)
	}
	// Held for the lease it takes next, so that the sweeper never takes
	// the delivery for lost in between, however slow this process is.
	ev, deliveries, _, err := c.events.CreateEvent(ctx, ev, store.Audience{SubscriptionID: &subscriptionID, Test: true,
		HeldUntil: c.clock.Now().Add(c.leaseFor)})
	if err != nil {
		return CheckResult{}, fmt.Errorf("check %s: %w", name, err)
	}
	if len(deliveries) != 1 {
		// Deleted between the check and the insert.
		return CheckResult{}, fmt.Errorf("check %s of %s: %w", name, subscriptionID, store.ErrNotFound)
	}
	leased, err := c.lease(ctx, deliveries[0])
	if err != nil {
		return CheckResult{}, fmt.Errorf("check %s: %w", name, err)
	}
	sig, err := c.secrets.Signing(ctx, leased, c.clock.Now())
	if err != nil {
		return CheckResult{}, fmt.Errorf("check %s: %w", name, err)
	}
	var signedAt time.Time
	switch name {
	case CheckWrongSignature:
		if sig.Keys, err = strangerKeys(sig.Keys); err != nil {
			return CheckResult{}, fmt.Errorf("check %s: %w", name, err)
		}
	case CheckStaleTimestamp:
		signedAt = c.clock.Now().Add(-checkStaleBy)
	}
	extra, err := c.secrets.Headers(leased)
	if err != nil {
		return CheckResult{}, fmt.Errorf("check %s: %w", name, err)
	}
	body, err := deliver.BodyFor(leased)
	if err != nil {
		return CheckResult{}, fmt.Errorf("check %s: %w", name, err)
	}
	res, err := snd.SendSignedAt(ctx, deliver.Request{Target: leased.URL, EventID: ev.ID.String(), Body: body, Signing: sig,
		SignedAt: signedAt, Headers: extra, TLS: c.secrets.EndpointTLS(leased), OAuth: c.secrets.EndpointOAuth(leased)})
	if err != nil {
		return CheckResult{}, fmt.Errorf("check %s: %w", name, err)
	}
	rec := store.AttemptRecord{Delivery: leased.Delivery, Status: store.DeliveryFailed,
		Attempt: store.Attempt{DeliveryID: leased.ID, Number: 1, Status: store.AttemptFailed, Trigger: store.TriggerManual,
			HTTPStatus: res.HTTPStatus, Error: res.ErrCode, DurationMS: int(res.Duration.Milliseconds()),
			ResponseBody: res.Body, AttemptedAt: res.Started, RequestHeaders: res.Headers}}
	if res.OK() {
		rec.Status, rec.Attempt.Status = store.DeliverySucceeded, store.AttemptSucceeded
	}
	// Recorded even if the merchant went away: the attempt was made.
	if err := c.deliveries.RecordAttempt(context.WithoutCancel(ctx), rec); err != nil {
		return CheckResult{}, fmt.Errorf("check %s: %w", name, err)
	}
	d := leased.Delivery
	d.Status, d.AttemptCount, d.NextAttemptAt, d.UpdatedAt = rec.Status, 1, nil, res.Started
	d.Attempts = []store.Attempt{rec.Attempt}
	return CheckResult{Case: name, Delivery: d, HTTPStatus: res.HTTPStatus, Error: res.ErrCode, Accepted: res.OK()}, nil
}

// strangerKeys signs with a fresh secret that no endpoint holds, of the
// scheme of the subscription's current key (keys), so that the endpoint
// is asked to refuse a signature it would otherwise read: a "v1a" one for
// an ed25519 subscription.
func strangerKeys(keys []signer.SigningKey) ([]signer.SigningKey, error) {
	scheme := signer.SchemeHMACSHA256
	if len(keys) > 0 {
		scheme = keys[0].Scheme()
	}
	secret, err := signer.NewSigningSecret(scheme)
	if err != nil {
		return nil, err
	}
	key, err := signer.ParseSigningKey(secret)
	if err != nil {
		return nil, err
	}
	return []signer.SigningKey{key}, nil
}

// lease takes d for its first attempt, as store.LeaseDelivery does (which
// is LeaseDeliveries of one request): ErrNotFound when it is not there to
// take.
func (c *Checker) lease(ctx context.Context, d store.Delivery) (store.LeasedDelivery, error) {
	leased, errs, err := c.deliveries.LeaseDeliveries(ctx, []store.LeaseRequest{{ID: d.ID, CreatedAt: d.CreatedAt, Number: 1}},
		c.clock.Now(), c.leaseFor)
	if err != nil {
		return store.LeasedDelivery{}, err
	}
	return leased[0], errs[0]
}
