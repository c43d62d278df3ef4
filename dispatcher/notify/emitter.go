package notify

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
)

// Who disabled or enabled a subscription, as webhook_endpoint.disabled's
// disabled_by and .enabled's enabled_by say it.
const (
	ByMerchant     = "merchant"
	ByOperator     = "operator"
	ByAutoDisable  = "auto_disable"
	ByEndpointGone = "endpoint_gone"
)

// ExhaustedInterval is the least time between two
// webhook_delivery.exhausted events about one subscription: an endpoint
// that is down exhausts many deliveries, and one event an interval says it.
const ExhaustedInterval = time.Hour

// TokenFailingAfter is how long an OAuth2 endpoint's token endpoint must
// have failed before webhook_endpoint.token_failing is sent, once per
// failing episode: a token endpoint that fails once and recovers on the
// next attempt is no news.
const TokenFailingAfter = 10 * time.Minute

// operationalPublisher publishes an operational event
// (publish.Operational is one).
type operationalPublisher interface {
	PublishOperational(ctx context.Context, merchantID, eventType string, about uuid.UUID, payload any) (store.Event, error)
}

// emitterClaims is what the Emitter needs of the database: the claim that
// keeps each event to once per state change or interval.
type emitterClaims interface {
	ClaimOperational(ctx context.Context, subscriptionID uuid.UUID, kind, key string, interval time.Duration) (bool, error)
	// TokenFailingSince notes a token failure and returns when its
	// episode began, with the token URL.
	TokenFailingSince(ctx context.Context, subscriptionID uuid.UUID) (time.Time, string, error)
}

// EmitterConfig is what the Emitter needs.
type EmitterConfig struct {
	// Publisher publishes the events (required).
	Publisher operationalPublisher
	// Claims rate-limits them (required).
	Claims emitterClaims
	// Clock is the one clock; default the system clock.
	Clock clock.Clock
	// Logger receives the logs; default discards.
	Logger *slog.Logger
}

func (c EmitterConfig) validate() error {
	if c.Publisher == nil || c.Claims == nil {
		return errors.New("emitter: Publisher and Claims are required")
	}
	return nil
}

// Emitter publishes the operational events (catalogue.Operational) of a
// merchant's subscriptions to its other subscriptions, through the
// engine's publish path, so that filters, fan-out, signing and retries
// apply to them as to any event. Each is claimed first
// (store.EndpointHealth.ClaimOperational): one event per state change,
// exhaustion at most once per ExhaustedInterval, token failure once per
// episode. Errors are logged: telling must never disturb delivery.
type Emitter struct {
	cfg    EmitterConfig
	clock  clock.Clock
	logger *slog.Logger
}

// NewEmitter checks cfg and builds the Emitter.
func NewEmitter(cfg EmitterConfig) (*Emitter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Emitter{cfg: cfg, clock: clock.Or(cfg.Clock), logger: cfg.Logger}
	if e.logger == nil {
		e.logger = slog.New(slog.DiscardHandler)
	}
	return e, nil
}

// LastError is the last failure a webhook_endpoint.disabled carries.
type LastError struct {
	Code       *string   `json:"code"`
	HTTPStatus *int      `json:"http_status"`
	At         time.Time `json:"at"`
}

type disabledPayload struct {
	SubscriptionID uuid.UUID  `json:"subscription_id"`
	DisabledBy     string     `json:"disabled_by"`
	Reason         string     `json:"reason"`
	LastError      *LastError `json:"last_error"`
}

type enabledPayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	EnabledBy      string    `json:"enabled_by"`
}

type exhaustedPayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	DeliveryID     uuid.UUID `json:"delivery_id"`
	EventID        uuid.UUID `json:"event_id"`
	EventType      string    `json:"event_type"`
	Attempts       int       `json:"attempts"`
	LastError      *string   `json:"last_error"`
	LastHTTPStatus *int      `json:"last_http_status"`
}

type certificatePayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	NotAfter       time.Time `json:"not_after"`
	DaysLeft       int       `json:"days_left"`
}

type tokenPayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	TokenHost      string    `json:"token_host"`
	FailingSince   time.Time `json:"failing_since"`
	LastError      string    `json:"last_error"`
}

// Disabled announces that the merchant's subscription was disabled, by
// whom (ByMerchant…) and why, once per disable.
func (e *Emitter) Disabled(ctx context.Context, merchantID string, id uuid.UUID, by, reason string, last *LastError) {
	e.emit(ctx, merchantID, id, claim{store.ClaimState, "disabled", 0}, catalogue.EndpointDisabled,
		disabledPayload{SubscriptionID: id, DisabledBy: by, Reason: reason, LastError: last})
}

// Enabled announces that the merchant's subscription, announced disabled
// before, is enabled again, by whom.
func (e *Emitter) Enabled(ctx context.Context, merchantID string, id uuid.UUID, by string) {
	e.emit(ctx, merchantID, id, claim{store.ClaimState, "enabled", 0}, catalogue.EndpointEnabled,
		enabledPayload{SubscriptionID: id, EnabledBy: by})
}

// AnnounceStatus is Disabled or Enabled by the merchant, as status
// (store.SubscriptionDisabled or enabled) says: what the admin surfaces
// call after an update that set a subscription's status.
func (e *Emitter) AnnounceStatus(ctx context.Context, merchantID string, id uuid.UUID, status store.SubscriptionStatus) {
	if status == store.SubscriptionDisabled {
		e.Disabled(ctx, merchantID, id, ByMerchant, "Disabled through the API or the portal.", nil)
		return
	}
	e.Enabled(ctx, merchantID, id, ByMerchant)
}

// DeliveryFailed announces a real delivery that failed for good
// (deliver.Notifier), at most once per subscription per
// ExhaustedInterval. d.Attempts holds its last attempt when the caller
// knows it. An operational event's own delivery announces nothing: its
// exhaustion would be another operational event, and so on.
func (e *Emitter) DeliveryFailed(ctx context.Context, d store.Delivery) {
	if d.Test || catalogue.IsOperational(d.EventType) {
		return
	}
	p := exhaustedPayload{SubscriptionID: d.SubscriptionID, DeliveryID: d.ID, EventID: d.EventID, EventType: d.EventType,
		Attempts: max(d.AttemptCount, 1)}
	if n := len(d.Attempts); n > 0 {
		p.LastError, p.LastHTTPStatus = d.Attempts[n-1].Error, d.Attempts[n-1].HTTPStatus
	}
	e.emit(ctx, d.MerchantID, d.SubscriptionID, claim{store.ClaimExhausted, "", ExhaustedInterval}, catalogue.DeliveryExhausted, p)
}

// EndpointGone announces the subscription of d disabled because its
// endpoint answered 410 Gone (deliver.GoneNotifier).
func (e *Emitter) EndpointGone(ctx context.Context, d store.Delivery) {
	if d.Test {
		return
	}
	gone := 410
	last := &LastError{HTTPStatus: &gone, At: e.clock.Now().UTC()}
	if n := len(d.Attempts); n > 0 {
		last.Code, last.At = d.Attempts[n-1].Error, d.Attempts[n-1].AttemptedAt.UTC()
	}
	e.Disabled(ctx, d.MerchantID, d.SubscriptionID, ByEndpointGone, "The endpoint answered 410 Gone.", last)
}

// SubscriptionDisabled announces a subscription the auto-disable job
// disabled (maintain.DisableNotifier).
func (e *Emitter) SubscriptionDisabled(ctx context.Context, d store.AutoDisabled, after time.Duration) {
	e.Disabled(ctx, d.MerchantID, d.SubscriptionID, ByAutoDisable,
		"Every attempt failed since "+d.FailingSince.UTC().Format(time.RFC3339)+" ("+durationWords(after)+").", nil)
}

// CertificateExpiring announces an mtls client certificate expiring
// soon (maintain.ExpiryNotifier): once per certificate, which the caller
// claimed.
func (e *Emitter) CertificateExpiring(ctx context.Context, c store.ExpiringCertificate, now time.Time) {
	if c.Certificate.NotAfter == nil {
		return
	}
	notAfter := c.Certificate.NotAfter.UTC()
	days := max(int(notAfter.Sub(now)/(24*time.Hour)), 0)
	e.publish(ctx, c.MerchantID, c.SubscriptionID, catalogue.CertificateExpiring,
		certificatePayload{SubscriptionID: c.SubscriptionID, NotAfter: notAfter, DaysLeft: days})
}

// TokenFailed hears of an attempt of d that failed because its
// subscription's OAuth2 token endpoint did (deliver.TokenNotifier), notes
// it, and announces webhook_endpoint.token_failing once the episode (the
// failures since the subscription's last success) is TokenFailingAfter
// old. why is the attempt's failure in the merchant's words.
func (e *Emitter) TokenFailed(ctx context.Context, d store.Delivery, why string) {
	if d.Test {
		return
	}
	since, tokenURL, err := e.cfg.Claims.TokenFailingSince(ctx, d.SubscriptionID)
	if err != nil {
		e.logger.ErrorContext(ctx, "note a token failure", "subscription_id", d.SubscriptionID, "error", err)
		return
	}
	e.TokenFailing(ctx, d.MerchantID, d.SubscriptionID, tokenURL, since, why)
}

// TokenFailing announces that the OAuth2 token endpoint at tokenURL of
// the merchant's subscription has failed since since, once that is
// TokenFailingAfter ago, once per episode (since tells one from the
// next). Only the URL's host is sent: its path or query may hold secrets.
func (e *Emitter) TokenFailing(ctx context.Context, merchantID string, id uuid.UUID, tokenURL string, since time.Time, lastErr string) {
	if e.clock.Now().Sub(since) < TokenFailingAfter {
		return
	}
	host := ""
	if u, err := url.Parse(tokenURL); err == nil {
		host = u.Hostname()
	}
	e.emit(ctx, merchantID, id, claim{store.ClaimTokenFailing, since.UTC().Format(time.RFC3339Nano), 0}, catalogue.TokenFailing,
		tokenPayload{SubscriptionID: id, TokenHost: host, FailingSince: since.UTC(), LastError: lastErr})
}

// claim is the claim an event needs before it is sent.
type claim struct {
	kind, key string
	interval  time.Duration
}

// emit publishes the event if its claim is won.
func (e *Emitter) emit(ctx context.Context, merchantID string, about uuid.UUID, c claim, eventType string, payload any) {
	won, err := e.cfg.Claims.ClaimOperational(ctx, about, c.kind, c.key, c.interval)
	if err != nil {
		e.logger.ErrorContext(ctx, "claim operational event", "type", eventType, "subscription_id", about, "error", err)
		return
	}
	if !won {
		return
	}
	e.publish(ctx, merchantID, about, eventType, payload)
}

// publish publishes the event about a subscription, logging a failure.
func (e *Emitter) publish(ctx context.Context, merchantID string, about uuid.UUID, eventType string, payload any) {
	ctx = context.WithoutCancel(ctx)
	ev, err := e.cfg.Publisher.PublishOperational(ctx, merchantID, eventType, about, payload)
	if err != nil {
		e.logger.ErrorContext(ctx, "publish operational event", "type", eventType, "subscription_id", about, "error", err)
		return
	}
	e.logger.InfoContext(ctx, "operational event published", "type", eventType, "subscription_id", about, "event_id", ev.ID)
}
