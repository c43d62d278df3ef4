package destination

import "time"

// Message is what a destination is sent for one attempt: the body an HTTP
// delivery would carry and the headers it would carry, which a kind puts
// in its message's headers, properties or attributes.
type Message struct {
	// DeliveryID names the delivery (a deduplication id where the target
	// has one). A batch's is its first delivery's.
	DeliveryID string
	// EventID is the event's id: a partition key when unordered.
	EventID string
	// EventType is the event's type; "" for a batch.
	EventType string
	// Body is the envelope (or the batch), exactly as an HTTP delivery
	// sends it, encrypted when the subscription has a key; the signature
	// covers it as is.
	Body []byte
	// ContentType is the body's media type.
	ContentType string
	// Headers are the Standard Webhooks headers (webhook-id,
	// webhook-timestamp, webhook-signature), the subscription's custom
	// headers, the ordering ones and the trace context, names in
	// lowercase.
	Headers map[string]string
	// OrderingKey is the ordered delivery's key; "" when unordered. A kind
	// that keeps order per key (a Kafka partition, an SQS FIFO group)
	// uses it.
	OrderingKey string
	// SignedAt is the attempt's time on the engine's clock: its
	// webhook-timestamp, and the message's own timestamp where the
	// target has one.
	SignedAt time.Time
	// Size is how many deliveries the body holds: 1, or a batch's.
	Size int
}

// PartitionKey is the key a kind partitions by: the ordering key, else
// the event id.
func (m Message) PartitionKey() string {
	if m.OrderingKey != "" {
		return m.OrderingKey
	}
	return m.EventID
}
