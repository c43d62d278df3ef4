// Package listener is the relay behind `webhookd listen`: the messages the
// engine and the command exchange over the WebSocket of GET /v1/listen,
// the Redis keys through which a worker hands a listener's delivery to the
// API process holding its connection and reads the answer back, and the
// command's client (Client), which forwards each delivery to a local URL.
package listener

import (
	"time"

	"github.com/google/uuid"
)

// The types of the messages on the WebSocket, each a JSON text message
// with a "type" field.
const (
	// TypeReady is the engine's first message: the listener's id and
	// signing secret.
	TypeReady = "ready"
	// TypeDelivery is a signed delivery for the command to forward.
	TypeDelivery = "delivery"
	// TypeAnswer is the command's answer to one delivery.
	TypeAnswer = "answer"
)

// Ready is the engine's first message on a listener's connection.
type Ready struct {
	Type string `json:"type"`
	// ListenerID names the listener: its deliveries carry it as their
	// subscription_id, and a command that reconnects names it to resume.
	ListenerID uuid.UUID `json:"listener_id"`
	// Secret signs the listener's deliveries. It is derived from the API
	// key, so it is the same for every listener that key opens.
	Secret string `json:"secret"`
	// Events is the listener's events list (["*"] for every type).
	Events []string `json:"events"`
	// GraceSeconds is how long the listener outlives its connection: a
	// command that reconnects within it keeps its listener and deliveries.
	GraceSeconds int `json:"grace_seconds"`
}

// Delivery is one attempt of a delivery, signed, as a worker hands it to
// the connection and the connection to the command.
type Delivery struct {
	Type string `json:"type"`
	// ID names this exchange; the answer carries it back.
	ID        string `json:"id"`
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	// Headers are the request's headers: the Standard Webhooks ones
	// (webhook-id, webhook-timestamp, webhook-signature), content-type
	// and user-agent.
	Headers map[string]string `json:"headers"`
	// Body is the event's envelope, exactly as signed.
	Body string `json:"body"`
	// Deadline is when the worker stops waiting for the answer: a delivery
	// found after it is stale and is not forwarded.
	Deadline time.Time `json:"deadline"`
}

// Answer is what the command's local server made of one delivery.
type Answer struct {
	Type string `json:"type"`
	// ID is the Delivery's.
	ID string `json:"id"`
	// Status is the local server's HTTP status; 0 when it gave none.
	Status int `json:"status,omitempty"`
	// Body is the start of the local server's answer (at most 1 KiB).
	Body string `json:"body,omitempty"`
	// DurationMS is how long the local exchange took.
	DurationMS int `json:"duration_ms"`
	// Error is the delivery error code when the local server gave no HTTP
	// answer: timeout, connection_refused, tls_error or network_error.
	Error string `json:"error,omitempty"`
}

// MaxAnswerBody is how much of the local server's answer is relayed, as
// much as an attempt record keeps.
const MaxAnswerBody = 1024

// DeliveriesKey is the Redis list a listener's deliveries wait in for the
// API process holding its connection.
func DeliveriesKey(listenerID uuid.UUID) string {
	return "webhookd:listener:" + listenerID.String() + ":deliveries"
}

// DeliveriesChannel is the Redis channel published on with each push to
// the listener's deliveries list, so that the API process holding its
// connection takes it at once (a waiter of the process's shared pub/sub
// connection) instead of holding a connection blocked on the list. Its
// hash tag is the whole list key, which has none, so that a Redis Cluster
// puts both in one slot and a transaction holding the push and the
// publish stays one.
func DeliveriesChannel(listenerID uuid.UUID) string {
	return "webhookd:listener:wake:{" + DeliveriesKey(listenerID) + "}"
}

// AnswerKey is the Redis list where the answer to one delivery is pushed
// for the worker waiting on it.
func AnswerKey(deliveryID string) string { return "webhookd:listener:answer:" + deliveryID }

// ClosedError is the attempt error of a delivery whose listener ended: its
// command went away and did not come back within the grace.
const ClosedError = "listener_closed"
