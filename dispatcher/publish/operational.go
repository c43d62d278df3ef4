package publish

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/store"
)

// Operational publishes webhookd's own operational events through a
// Publisher: a type of its own, so that the Publisher's surface stays
// the producers'.
type Operational struct{ p *Publisher }

// NewOperational is the publisher of operational events through p.
func NewOperational(p *Publisher) *Operational { return &Operational{p: p} }

// PublishOperational publishes an operational event (catalogue.Operational)
// of the merchant about its subscription about, through the path every
// event takes (filters, fan-out, signing, retries), to every matching
// subscription but about itself: a subscription never hears of itself, so
// an endpoint that fails cannot feed its own failures back to itself. The
// producers' rules are not applied: webhookd builds the payload.
func (o *Operational) PublishOperational(ctx context.Context, merchantID, eventType string, about uuid.UUID, payload any) (store.Event, error) {
	if !catalogue.IsOperational(eventType) {
		return store.Event{}, fmt.Errorf("publish operational event: %s is not an operational type", eventType)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return store.Event{}, fmt.Errorf("encode %s payload: %w", eventType, err)
	}
	ev, _, _, err := o.p.publish(ctx, store.NewEvent{MerchantID: merchantID, Type: eventType, Payload: body}, store.Audience{Except: &about})
	if err != nil {
		return store.Event{}, fmt.Errorf("publish %s about %s: %w", eventType, about, err)
	}
	return ev, nil
}
