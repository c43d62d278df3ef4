package store

import (
	"encoding/json"

	"github.com/google/uuid"
)

// NewEvent is an event as a producer publishes it.
type NewEvent struct {
	// ID is the producer's event id; nil lets webhookd make a UUIDv7.
	ID         *uuid.UUID      `json:"id,omitempty"`
	MerchantID string          `json:"merchant_id"`
	Type       string          `json:"type"`
	Payload    json.RawMessage `json:"payload"`
	// APIVersion overrides the merchant's pinned version when set.
	APIVersion string `json:"api_version,omitempty"`
}
