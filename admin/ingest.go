package admin

import (
	"context"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/store"
)

// Publisher is what the HTTP surfaces need of the delivery pipeline.
type Publisher interface {
	// Publish stores the event and its deliveries in one transaction and
	// schedules them; created is false when the event id already existed.
	Publish(ctx context.Context, e store.NewEvent) (ev store.Event, created bool, err error)
	// Redeliver appends one immediate manual attempt to a delivery.
	Redeliver(ctx context.Context, merchantID string, deliveryID uuid.UUID) (store.Delivery, error)
	// SendTestEvent stores a ping.test event for one subscription and
	// schedules its delivery.
	SendTestEvent(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (store.Delivery, error)
}

// ingestRoutes are the internal publishing routes (POST /internal/v1/events).
func (s *Server) ingestRoutes(r chi.Router) {
	// TODO(pipeline): POST /events
}
