package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/store"
)

// ErrInvalidEvent reports an event that can never be stored (no merchant,
// no type, a payload that is not a JSON object). The HTTP surface checks
// these rules first with its own error codes; the producer path relies on
// this one.
var ErrInvalidEvent = errors.New("invalid event")

// Publish stores the event and one pending delivery per matching enabled
// subscription in one transaction, then enqueues their first attempts.
// created is false when the event id was already stored: then nothing new
// is written or enqueued and the stored event is returned.
//
// Once Publish returns, the event is durable: if enqueueing fails (Redis
// down), the sweeper enqueues the deliveries later, so that is logged, not
// returned.
func (d *Dispatcher) Publish(ctx context.Context, e store.NewEvent) (store.Event, bool, error) {
	ev, _, created, err := d.publish(ctx, e, store.Audience{})
	return ev, created, err
}

// publish is Publish for any audience; send_test_event uses it with one
// subscription and Test set.
func (d *Dispatcher) publish(ctx context.Context, e store.NewEvent, to store.Audience) (store.Event, []store.Delivery, bool, error) {
	ev, err := d.newEvent(ctx, e)
	if err != nil {
		return store.Event{}, nil, false, err
	}
	ev, deliveries, created, err := d.store.CreateEvent(ctx, ev, to)
	if err != nil {
		return store.Event{}, nil, false, err
	}
	if !created {
		return ev, nil, false, nil
	}
	d.metrics.eventsIngested.WithLabelValues(ev.Type).Inc()
	if _, err := d.enqueueFirstAttempts(ctx, ev.ID, deliveries, ev.CreatedAt); err != nil {
		d.logger.WarnContext(ctx, "enqueue first attempts; the sweeper will retry", "event_id", ev.ID, "error", err)
	}
	d.logger.InfoContext(ctx, "event stored", "event_id", ev.ID, "type", ev.Type, "merchant_id", ev.MerchantID,
		"deliveries", len(deliveries))
	return ev, deliveries, true, nil
}

// newEvent validates e and fixes everything about the stored event: its id,
// its api_version (the producer's, or the merchant's pinned one, creating
// the merchant pinned to the default version if webhookd has not seen it),
// its creation instant and its envelope bytes.
func (d *Dispatcher) newEvent(ctx context.Context, e store.NewEvent) (store.Event, error) {
	if strings.TrimSpace(e.MerchantID) == "" {
		return store.Event{}, fmt.Errorf("%w: merchant_id is required", ErrInvalidEvent)
	}
	if strings.TrimSpace(e.Type) == "" {
		return store.Event{}, fmt.Errorf("%w: type is required", ErrInvalidEvent)
	}
	payload, err := compactObject(e.Payload)
	if err != nil {
		return store.Event{}, err
	}
	m, err := d.merchant(ctx, e.MerchantID)
	if err != nil {
		return store.Event{}, err
	}
	version := e.APIVersion
	if version == "" {
		version = m.APIVersion
		if d.cfg.Versions != nil {
			version = d.cfg.Versions(version)
		}
	}
	// Millisecond precision: the envelope date shows milliseconds, the
	// Event resource's created_at must equal it, and the deliveries' UUIDv7
	// ids carry this instant.
	now := d.cfg.Now().UTC().Truncate(time.Millisecond)
	var id uuid.UUID
	if e.ID != nil {
		id = *e.ID
	} else if id, err = uuidV7At(now); err != nil {
		return store.Event{}, err
	}
	body, err := envelope(id, e.Type, version, payload, now)
	if err != nil {
		return store.Event{}, err
	}
	return store.Event{ID: id, MerchantID: e.MerchantID, Type: e.Type, APIVersion: version, Body: body, CreatedAt: now}, nil
}

// merchant returns the merchant, creating it pinned to the default version
// when webhookd has not seen it. It reads first: an upsert on every publish
// would write (and lock) the merchant's row for nothing.
func (d *Dispatcher) merchant(ctx context.Context, id string) (store.Merchant, error) {
	m, err := d.store.GetMerchant(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return d.store.EnsureMerchant(ctx, id, d.cfg.DefaultAPIVersion)
	}
	return m, err
}

// compactObject checks that a payload is a JSON object and returns it
// compacted, so that the envelope's bytes do not depend on the producer's
// formatting.
func compactObject(p json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(p)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: payload must be a JSON object", ErrInvalidEvent)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, fmt.Errorf("%w: payload is not valid JSON", ErrInvalidEvent)
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

// handleIngest turns a producer task into a stored event. An event that can
// never be stored is logged and dropped (revoked, not archived, so that a
// corrected event with the same id can be published); an internal error is
// retried by asynq.
func (d *Dispatcher) handleIngest(ctx context.Context, t *asynq.Task) error {
	var pe producer.Event
	if err := json.Unmarshal(t.Payload(), &pe); err != nil {
		d.logger.ErrorContext(ctx, "ingest task is not an event; dropped", "error", err)
		return asynq.RevokeTask
	}
	e := store.NewEvent{MerchantID: pe.MerchantID, Type: pe.Type, Payload: pe.Payload, APIVersion: pe.APIVersion}
	if pe.ID != "" {
		id, err := uuid.Parse(pe.ID)
		if err != nil {
			d.logger.ErrorContext(ctx, "ingest task has a bad event id; dropped", "event_id", pe.ID)
			return asynq.RevokeTask
		}
		e.ID = &id
	}
	_, _, err := d.Publish(ctx, e)
	switch {
	case errors.Is(err, ErrInvalidEvent), errors.Is(err, store.ErrConflict):
		d.logger.ErrorContext(ctx, "ingest task refused; dropped", "event_id", pe.ID, "merchant_id", pe.MerchantID,
			"type", pe.Type, "error", err)
		return asynq.RevokeTask
	case err != nil:
		d.logger.ErrorContext(ctx, "ingest event", "event_id", pe.ID, "error", err)
		return err
	}
	return nil
}
