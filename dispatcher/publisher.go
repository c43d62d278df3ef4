package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/filter"
	"github.com/webhookd/webhookd/invalid"
	"github.com/webhookd/webhookd/merchants"
	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/store"
)

// TestEventType is the event kind send_test_event stores (spec 6.1). It is
// reserved: producers cannot publish it and subscriptions cannot name it.
const TestEventType = "ping.test"

// The rules of a published event, as they name themselves in an
// invalid.Error and in webhookd_events_refused_total{rule}.
const (
	ruleTypeReserved      = "type_reserved"
	ruleTypeUnknown       = "type_unknown"
	rulePayloadNotObject  = "payload_not_object"
	rulePayloadNotJSON    = producer.RulePayloadNotJSON // the producer refuses it itself too
	ruleIDNotUUID         = producer.RuleIDNotUUID
	ruleAPIVersionUnknown = "api_version_unknown"
	ruleIDTaken           = "id_taken"
	ruleTaskUnreadable    = "task_unreadable"
)

// publishedEventRules lists every rule a producer event can break, so
// that each refusal series exists, at zero, from the start.
func publishedEventRules() []string {
	return []string{invalid.RuleMissing, merchants.RuleIDMalformed, ruleTypeReserved, ruleTypeUnknown,
		rulePayloadNotObject, invalid.RuleTooLarge, rulePayloadNotJSON, ruleIDNotUUID, ruleAPIVersionUnknown,
		ruleIDTaken, ruleTaskUnreadable}
}

// testEventMessage is the message of every ping.test payload.
const testEventMessage = "This is a test event sent by webhookd. Handlers may ignore it."

// publisherConfig is what the Publisher needs.
type publisherConfig struct {
	// Store is the database (required).
	Store *store.Store
	// EventTypes is the catalogue producers may publish (required).
	EventTypes []string
	// MaxPayloadBytes bounds a payload; 0 means no bound.
	MaxPayloadBytes int
	// VersionUsable tells whether a producer may name an api_version at
	// now; nil accepts any.
	VersionUsable func(version string, now time.Time) bool
	// Versions maps a merchant's pinned version to the version events are
	// serialised at; nil keeps it.
	Versions func(merchantVersion string) string
	// DefaultAPIVersion is the version a merchant seen for the first time
	// is pinned to (required).
	DefaultAPIVersion string
}

func (c publisherConfig) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("publisher: Store is required")
	case len(c.EventTypes) == 0:
		return errors.New("publisher: EventTypes is required")
	case slices.Contains(c.EventTypes, TestEventType):
		return fmt.Errorf("publisher: %s is reserved for send_test_event", TestEventType)
	case c.DefaultAPIVersion == "":
		return errors.New("publisher: DefaultAPIVersion is required")
	}
	return nil
}

// Publisher owns the event catalogue and every rule on a published event.
// HTTP ingest, the worker that stores producer tasks and send_test_event
// all publish through it, so an event refused on one path is refused on
// every path, with the same parameter and message.
type Publisher struct {
	cfg     publisherConfig
	filters *filter.Cache
	tasks   *enqueuer
	metrics *metrics
	clock   Clock
	logger  *slog.Logger
}

func newPublisher(cfg publisherConfig, tasks *enqueuer, m *metrics, clock Clock, logger *slog.Logger) (*Publisher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	compiler, err := filter.NewCompiler()
	if err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	return &Publisher{cfg: cfg, filters: filter.NewCache(compiler), tasks: tasks, metrics: m, clock: clock, logger: logger}, nil
}

// EventTypes is the catalogue producers may publish and subscriptions may
// name.
func (p *Publisher) EventTypes() []string { return slices.Clone(p.cfg.EventTypes) }

// Check applies every rule of a published event, in the order a producer
// would fix them, and returns the first one broken as an *invalid.Error
// naming the field. It reads nothing and writes nothing.
func (p *Publisher) Check(e producer.Event) error {
	if err := merchants.CheckID("merchant_id", e.MerchantID); err != nil {
		return err
	}
	switch {
	case e.Type == "":
		return invalid.Missing("type")
	case e.Type == TestEventType:
		return invalid.Value("type", ruleTypeReserved, fmt.Sprintf("Unknown event type %s; %s is reserved for send_test_event.",
			quote(e.Type), TestEventType))
	case !slices.Contains(p.cfg.EventTypes, e.Type):
		return invalid.Value("type", ruleTypeUnknown, fmt.Sprintf("Unknown event type %s; %s is reserved for send_test_event.",
			quote(e.Type), TestEventType))
	}
	payload := bytes.TrimSpace(e.Payload)
	switch {
	case len(payload) == 0 || bytes.Equal(payload, []byte("null")):
		return invalid.Missing("payload")
	case payload[0] != '{':
		return invalid.Value("payload", rulePayloadNotObject, "payload must be a JSON object.")
	case p.cfg.MaxPayloadBytes > 0 && len(payload) > p.cfg.MaxPayloadBytes:
		return invalid.Value("payload", invalid.RuleTooLarge, fmt.Sprintf("payload is larger than %d bytes.", p.cfg.MaxPayloadBytes))
	case !json.Valid(payload):
		return invalid.Value("payload", rulePayloadNotJSON, "payload is not valid JSON.")
	}
	if e.ID != "" {
		if _, err := uuid.Parse(e.ID); err != nil || len(e.ID) != 36 {
			return invalid.Value("id", ruleIDNotUUID, "id must be a UUID.")
		}
	}
	if e.APIVersion != "" && p.cfg.VersionUsable != nil && !p.cfg.VersionUsable(e.APIVersion, p.clock.Now()) {
		return invalid.Value("api_version", ruleAPIVersionUnknown, "Unknown or sunset api_version "+quote(e.APIVersion)+".")
	}
	return nil
}

// quote shows a producer's value in a message, cut to a readable length.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + s + `"`
}

// Publish checks e (Check), then stores the event and one pending delivery
// per matching enabled subscription in one transaction, and enqueues their
// first attempts. created is false when the event id was already stored:
// then nothing new is written or enqueued and the stored event is
// returned.
//
// Once Publish returns, the event is durable: if enqueueing fails (Redis
// down), the sweeper enqueues the deliveries later, so that is logged, not
// returned.
func (p *Publisher) Publish(ctx context.Context, e producer.Event) (store.Event, bool, error) {
	if err := p.Check(e); err != nil {
		return store.Event{}, false, err
	}
	ne := store.NewEvent{MerchantID: e.MerchantID, Type: e.Type, Payload: e.Payload, APIVersion: e.APIVersion}
	if e.ID != "" {
		id := uuid.MustParse(e.ID) // Check parsed it
		ne.ID = &id
	}
	ev, _, created, err := p.publish(ctx, ne, store.Audience{})
	return ev, created, err
}

// publish stores an event that passed the rules for any audience;
// send_test_event uses it with one subscription and Test set.
func (p *Publisher) publish(ctx context.Context, e store.NewEvent, to store.Audience) (store.Event, []store.Delivery, bool, error) {
	ev, filtered, err := p.newEvent(ctx, e)
	if err != nil {
		return store.Event{}, nil, false, err
	}
	if to.SubscriptionID == nil && len(filtered) > 0 {
		if to.Matched, err = p.matchFilters(ctx, ev, filtered); err != nil {
			return store.Event{}, nil, false, err
		}
	}
	ev, deliveries, created, err := p.cfg.Store.CreateEvent(ctx, ev, to)
	if err != nil {
		return store.Event{}, nil, false, err
	}
	if !created {
		return ev, nil, false, nil
	}
	p.metrics.eventsIngested.WithLabelValues(ev.Type).Inc()
	// Skipped deliveries (disabled subscriptions) wait for recover and
	// ordered ones behind their key's head wait for it: neither is due.
	if _, err := p.tasks.firstAttempts(ctx, ev.ID, dueNow(deliveries), ev.CreatedAt); err != nil {
		p.logger.WarnContext(ctx, "enqueue first attempts; the sweeper will retry", "event_id", ev.ID, "error", err)
	}
	p.logger.InfoContext(ctx, "event stored", "event_id", ev.ID, "type", ev.Type, "merchant_id", ev.MerchantID,
		"deliveries", len(deliveries))
	return ev, deliveries, true, nil
}

// dueNow leaves out the deliveries with no due time: ordered ones that wait
// behind an earlier one of their key (the end of that one enqueues them) and
// skipped ones (recover replays them).
func dueNow(deliveries []store.Delivery) []store.Delivery {
	return slices.DeleteFunc(slices.Clone(deliveries), func(d store.Delivery) bool { return d.NextAttemptAt == nil })
}

// newEvent fixes everything about the stored event: its id, its
// api_version (the producer's, or the merchant's pinned one, creating the
// merchant pinned to the default version if webhookd has not seen it), its
// creation instant and its envelope bytes. It also returns the filters a
// fan-out of the event must evaluate, read with the merchant.
func (p *Publisher) newEvent(ctx context.Context, e store.NewEvent) (store.Event, []store.FilteredSubscription, error) {
	payload, err := compactObject(e.Payload)
	if err != nil {
		return store.Event{}, nil, err
	}
	m, filtered, err := p.merchant(ctx, e.MerchantID, e.Type)
	if err != nil {
		return store.Event{}, nil, err
	}
	version := e.APIVersion
	if version == "" {
		version = m.APIVersion
		if p.cfg.Versions != nil {
			version = p.cfg.Versions(version)
		}
	}
	// Millisecond precision: the envelope date shows milliseconds, the
	// Event resource's created_at must equal it, and the deliveries' UUIDv7
	// ids carry this instant.
	now := p.clock.Now().UTC().Truncate(time.Millisecond)
	var id uuid.UUID
	if e.ID != nil {
		id = *e.ID
	} else if id, err = uuidV7At(now); err != nil {
		return store.Event{}, nil, err
	}
	body, err := envelope(id, e.Type, version, payload, now)
	if err != nil {
		return store.Event{}, nil, err
	}
	return store.Event{ID: id, MerchantID: e.MerchantID, Type: e.Type, APIVersion: version, Body: body, CreatedAt: now}, filtered, nil
}

// merchant returns the merchant, with the filters of its subscriptions an
// event of eventType must pass, creating it pinned to the default version
// when webhookd has not seen it (then it has no subscription). It reads
// first: an upsert on every publish would write (and lock) the merchant's
// row for nothing.
func (p *Publisher) merchant(ctx context.Context, id, eventType string) (store.Merchant, []store.FilteredSubscription, error) {
	m, filtered, err := p.cfg.Store.MerchantWithFilters(ctx, id, eventType)
	if errors.Is(err, store.ErrNotFound) {
		m, err := p.cfg.Store.EnsureMerchant(ctx, id, p.cfg.DefaultAPIVersion)
		return m, nil, err
	}
	return m, filtered, err
}

// testPayload is the payload of a ping.test event (DESIGN.md).
type testPayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	Message        string    `json:"message"`
}

// SendTestEvent stores a ping.test event of the merchant, at its pinned
// version, with one test delivery to subscriptionID alone (whatever its
// events list or status), and schedules it like any delivery: same
// signing, headers and retry schedule. Test deliveries never touch the
// subscription's health and never send a failure e-mail. It returns the
// delivery as created, before its first attempt.
func (p *Publisher) SendTestEvent(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (store.Delivery, error) {
	// Check first, so that a stranger's or a missing subscription stores no
	// event at all.
	if _, err := p.cfg.Store.GetSubscription(ctx, merchantID, subscriptionID); err != nil {
		return store.Delivery{}, err
	}
	payload, err := json.Marshal(testPayload{SubscriptionID: subscriptionID, Message: testEventMessage})
	if err != nil {
		return store.Delivery{}, fmt.Errorf("encode test payload: %w", err)
	}
	_, deliveries, _, err := p.publish(ctx, store.NewEvent{MerchantID: merchantID, Type: TestEventType, Payload: payload},
		store.Audience{SubscriptionID: &subscriptionID, Test: true})
	if err != nil {
		return store.Delivery{}, err
	}
	if len(deliveries) != 1 {
		// Deleted between the check and the insert.
		return store.Delivery{}, fmt.Errorf("send test event to %s: %w", subscriptionID, store.ErrNotFound)
	}
	del := deliveries[0]
	del.Attempts = []store.Attempt{}
	return del, nil
}

// handleIngest turns a producer task into a stored event. An event that
// breaks a rule is never stored nor delivered: it is refused with a log
// line and a metric naming the rule, and the refusal is kept where the
// producer reads it (producer.Refusal); the task is revoked, not archived,
// so that a corrected event with the same id can be published. An internal
// error is returned for asynq to retry.
func (p *Publisher) handleIngest(ctx context.Context, t *asynq.Task) error {
	var e producer.Event
	if err := json.Unmarshal(t.Payload(), &e); err != nil {
		return p.refuse(ctx, e, invalid.Value("payload", ruleTaskUnreadable, "The task is not a JSON event."))
	}
	_, _, err := p.Publish(ctx, e)
	if bad := invalid.As(err); bad != nil {
		return p.refuse(ctx, e, bad)
	}
	if errors.Is(err, store.ErrConflict) {
		return p.refuse(ctx, e, invalid.Value("id", ruleIDTaken, "The event id is taken by another merchant's event."))
	}
	if err != nil {
		return fmt.Errorf("ingest event %s: %w", e.ID, err)
	}
	// A corrected re-publish of a refused id is stored now: its refusal
	// no longer holds. (Done here, not by the producer, so that the core
	// API's publish costs one Redis call.)
	if err := p.tasks.clearRefusal(ctx, e.ID); err != nil {
		p.logger.WarnContext(ctx, "clear the event's refusal", "event_id", e.ID, "error", err)
	}
	return nil
}

// refuse drops a producer task that breaks a rule, saying which.
func (p *Publisher) refuse(ctx context.Context, e producer.Event, bad *invalid.Error) error {
	p.metrics.eventsRefused.WithLabelValues(bad.Rule).Inc()
	p.logger.ErrorContext(ctx, "producer event refused; not stored, not delivered", "event_id", e.ID,
		"merchant_id", e.MerchantID, "rule", bad.Rule, "param", bad.Param, "reason", bad.Message)
	if e.ID != "" {
		if err := p.tasks.refusal(ctx, e.ID, producer.Refused{Param: bad.Param, Rule: bad.Rule, Message: bad.Message}); err != nil {
			p.logger.WarnContext(ctx, "keep refusal for the producer", "event_id", e.ID, "error", err)
		}
	}
	return asynq.RevokeTask
}

// compactObject returns a checked payload compacted, so that the
// envelope's bytes do not depend on the producer's formatting.
func compactObject(p json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, bytes.TrimSpace(p)); err != nil {
		return nil, fmt.Errorf("compact payload: %w", err)
	}
	return buf.Bytes(), nil
}

// envelopeJSON is the delivered envelope (DESIGN.md); its field order is
// the order on the wire.
type envelopeJSON struct {
	ID         uuid.UUID       `json:"id"`
	Type       string          `json:"type"`
	APIVersion string          `json:"api_version"`
	Payload    json.RawMessage `json:"payload"`
	Date       string          `json:"date"`
}

// envelope builds the exact bytes every attempt of the event sends. They
// are built once, stored, and never re-serialised (spec 9.6).
func envelope(id uuid.UUID, typ, version string, payload json.RawMessage, at time.Time) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(envelopeJSON{ID: id, Type: typ, APIVersion: version, Payload: payload,
		Date: at.UTC().Format("2006-01-02T15:04:05.000Z07:00")})
	if err != nil {
		return nil, fmt.Errorf("encode envelope of %s: %w", id, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// uuidV7At makes a UUIDv7 whose timestamp is t (milliseconds), so that an
// event id made by webhookd tells when the event was created.
func uuidV7At(t time.Time) (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.UUID{}, fmt.Errorf("new event id: %w", err)
	}
	ms := uint64(t.UnixMilli())
	for i := 0; i < 6; i++ {
		id[i] = byte(ms >> (8 * (5 - i)))
	}
	return id, nil
}
