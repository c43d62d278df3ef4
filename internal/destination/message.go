package destination

import (
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
)

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
	// Header are the same headers as an HTTP request carries them
	// (canonical names), as the engine built and signed them. A kind
	// that speaks HTTP sends them as they are; Headers, which the other
	// kinds read, is drawn from Header once per attempt (Pool.For).
	Header http.Header
	// Custom are the subscription's own headers (in Header too), whose
	// values a record of what was sent masks.
	Custom map[string]string
	// URL is where an HTTP endpoint's request goes, the subscription's
	// url or the one its transformation chose; "" for other kinds.
	URL string
	// Subject is the subscription the message is for.
	Subject Subject
	// Credentials are the subscription's endpoint credentials (client
	// certificate, OAuth2 client) as the engine's HTTP sender reads
	// them; nil when it has none. The registry never reads them.
	Credentials any
}

// Subject is a subscription as the registry chooses its kind: by its
// stored destination when it has one, else by the subscription's own
// kind (an HTTP endpoint, a listener).
type Subject struct {
	// ID is the subscription's id; MerchantID its merchant's.
	ID         uuid.UUID
	MerchantID string
	// Kind is the subscription's kind ("endpoint", "listener").
	Kind string
	// Sealed is the stored destination, sealed; nil when none is stored.
	Sealed []byte
}

// lowerHeaders fills m.Headers from m.Header, names in lowercase, when
// the engine gave only the latter.
func (m *Message) lowerHeaders() {
	if m.Headers != nil || m.Header == nil {
		return
	}
	m.Headers = make(map[string]string, len(m.Header))
	for name := range m.Header {
		m.Headers[strings.ToLower(name)] = m.Header.Get(name)
	}
}

// PartitionKey is the key a kind partitions by: the ordering key, else
// the event id.
func (m Message) PartitionKey() string {
	if m.OrderingKey != "" {
		return m.OrderingKey
	}
	return m.EventID
}
