package store

import (
	"time"

	"github.com/google/uuid"
)

// Merchant is what webhookd keeps of a core-API merchant.
type Merchant struct {
	ID                string
	APIVersion        string
	NotificationEmail *string
	// PortalAccentColor (#RRGGBB) and PortalLogoURL brand the merchant's
	// portal sessions that set none of their own; nil when unset.
	PortalAccentColor *string
	PortalLogoURL     *string
	CreatedAt         time.Time
	UpdatedAt         time.Time
	// RetentionDays is how many days its events and deliveries are kept
	// (RetentionDays, the engine's, unless set shorter).
	RetentionDays int
}

// APIKey is a stored key: only its hash is kept.
type APIKey struct {
	ID          uuid.UUID
	MerchantID  string
	Environment string
	Scopes      []string
	CreatedAt   time.Time
	// Prefix is the part of the key that may be shown (see APIKeyPrefix);
	// empty for a key issued before webhookd kept it.
	Prefix string
	// LastUsedAt is when the key last authenticated a request, up to a
	// minute behind (usage is written in batches); nil if never.
	LastUsedAt *time.Time
	// ExpiresAt is when a rolled key stops working; nil until rolled.
	ExpiresAt *time.Time
	// RevokedAt is when the key was revoked; nil while it is not.
	RevokedAt *time.Time
}

// SubscriptionStatus says whether a subscription receives deliveries.
type SubscriptionStatus string

// Subscription statuses.
const (
	SubscriptionEnabled  SubscriptionStatus = "enabled"
	SubscriptionDisabled SubscriptionStatus = "disabled"
)

// Subscription is a merchant's webhook endpoint.
type Subscription struct {
	ID          uuid.UUID
	MerchantID  string
	URL         string
	Events      []string
	Description *string
	Status      SubscriptionStatus
	Metadata    map[string]string
	Health      Health
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// RateLimit caps the deliveries per second to the endpoint; nil: none.
	RateLimit *int
	// OrderingKey is the dotted path into the envelope whose value orders
	// the deliveries; nil: unordered.
	OrderingKey *string
	// Filter is the filter expression; nil delivers every event of the
	// subscribed types.
	Filter *string
	// SealedHeaders are the extra request headers, sealed (see
	// signer.Sealer); nil when there are none.
	SealedHeaders []byte
	// Authentication is how deliveries authenticate to the endpoint beyond
	// their signature (mTLS); nil for none.
	Authentication *Authentication
	// SignatureScheme is SchemeHMACSHA256 or SchemeEd25519, chosen at
	// creation; SigningPublicKeys are, for ed25519, the public keys of its
	// two newest secrets, newest first, expired or not (see signingColumns).
	SignatureScheme   string
	SigningPublicKeys []SigningPublicKey
	// EncryptionKey is the public JWK deliveries' bodies are encrypted to
	// (as signer.EncryptionKey marshals it); nil: sent in clear.
	EncryptionKey []byte
	// TraceContext says whether its deliveries carry a W3C traceparent
	// header (docs/tracing.md); true unless the merchant turned it off.
	TraceContext bool
	// PayloadStyle is PayloadFull or PayloadThin: what a delivery's body
	// holds of the event.
	PayloadStyle string
	// Batch groups the subscription's deliveries into one request; nil
	// sends one delivery per request.
	Batch *Batch
	// Destination is where deliveries go when not to URL (a broker); nil
	// for an HTTP endpoint.
	Destination *Destination
	// Transformation reshapes each delivery before it is sent; nil for
	// none.
	Transformation *Transformation
	// RetryPolicy is its own retry schedule and attempt timeout; nil:
	// the engine's.
	RetryPolicy *RetryPolicy
}

// The payload styles of a subscription.
const (
	// PayloadFull delivers the stored envelope, payload and all.
	PayloadFull = "full"
	// PayloadThin delivers the envelope with a reference to the event's
	// object in place of its payload.
	PayloadThin = "thin"
)

// Batch is how a subscription's deliveries are grouped into requests: up
// to MaxSize deliveries, gathered for at most MaxWaitMS milliseconds.
type Batch struct {
	MaxSize   int `json:"max_size"`
	MaxWaitMS int `json:"max_wait_ms"`
}

// Authentication is a subscription's endpoint authentication as stored:
// the whole of it sealed, and the summary that reads may show.
type Authentication struct {
	// Sealed is the authentication as JSON, sealed with the master key
	// (signer.Sealer): it holds the secrets (a client key).
	Sealed []byte
	// Summary is its public part.
	Summary AuthenticationSummary
}

// AuthenticationSummary is what a read shows of an authentication: never
// a secret. Each type fills the fields that describe it.
type AuthenticationSummary struct {
	// Type is the kind of authentication: "mtls" or
	// "oauth2_client_credentials".
	Type string `json:"type"`
	// Subject, Issuer and Serial name the mtls client certificate
	// (distinguished names as RFC 2253 strings, the serial in decimal).
	Subject string `json:"subject,omitempty"`
	Issuer  string `json:"issuer,omitempty"`
	Serial  string `json:"serial,omitempty"`
	// NotAfter is when the client certificate expires.
	NotAfter *time.Time `json:"not_after,omitempty"`
	// ServerCA says whether the endpoint's certificate is checked against
	// the merchant's own CA rather than the system's roots.
	ServerCA bool `json:"server_ca,omitempty"`
	// ExpiryNotifiedAt is when the merchant was told the mtls client
	// certificate expires soon; a new authentication starts without it.
	ExpiryNotifiedAt *time.Time `json:"expiry_notified_at,omitempty"`
	// TokenURL, ClientID, Scopes and Audience are an
	// oauth2_client_credentials authentication's public part; Credential
	// is the kind of its secret ("client_secret" or "private_key").
	TokenURL   string   `json:"token_url,omitempty"`
	ClientID   string   `json:"client_id,omitempty"`
	Scopes     []string `json:"scopes,omitempty"`
	Audience   string   `json:"audience,omitempty"`
	Credential string   `json:"credential,omitempty"`
}

// Health counts a subscription's recent outcomes; test deliveries never
// change it.
type Health struct {
	ConsecutiveFailures int
	LastSuccessAt       *time.Time
	LastFailureAt       *time.Time
}

// Event is a stored event. Body is the exact envelope delivered.
type Event struct {
	ID         uuid.UUID
	MerchantID string
	Type       string
	APIVersion string
	Body       []byte
	CreatedAt  time.Time
	// TraceParent is the W3C traceparent of the span that published the
	// event, written with it ("" when tracing is off) and read by each
	// attempt's lease (LeasedDelivery.TraceParent); reads of events leave
	// it empty.
	TraceParent string
	// DeliverAt is when a scheduled event's deliveries make their first
	// attempt; nil for an event delivered at once.
	DeliverAt *time.Time
}

// DeliveryStatus is where a delivery stands (DESIGN.md).
type DeliveryStatus string

// Delivery statuses.
const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliverySucceeded DeliveryStatus = "succeeded"
	DeliveryFailed    DeliveryStatus = "failed"
	// DeliverySkipped is an event that matched a disabled subscription:
	// kept, never attempted, until recover replays it.
	DeliverySkipped DeliveryStatus = "skipped"
	// DeliveryScheduled is how reads show a pending delivery of a scheduled
	// event before its first attempt is recorded; it is stored as pending.
	DeliveryScheduled DeliveryStatus = "scheduled"
	// DeliveryCancelled is a scheduled delivery cancelled before its first
	// attempt: never attempted.
	DeliveryCancelled DeliveryStatus = "cancelled"
)

// Delivery is one event's series of attempts to one subscription.
type Delivery struct {
	ID             uuid.UUID
	MerchantID     string
	EventID        uuid.UUID
	EventCreatedAt time.Time
	EventType      string
	SubscriptionID uuid.UUID
	Status         DeliveryStatus
	Test           bool
	AttemptCount   int
	NextAttemptAt  *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
	Attempts       []Attempt
	// OrderingKey and Sequence place an ordered delivery in its key's
	// line (nil for unordered ones). They are read where the fan-out and
	// the lease read the row, not by every delivery query.
	OrderingKey *string
	Sequence    *int64
	// RateLimit is the subscription's cap per second as the fan-out or the
	// lease read it (0: none).
	RateLimit int
	// Batch is the subscription's batch as the fan-out, the lease or the
	// line's head read it (nil: none).
	Batch *Batch
	// PollPosition places a poll subscription's delivery in its line, as
	// the fan-out gave it (poll.go); nil for every other delivery.
	PollPosition *int64
	// RetryPolicy is the policy the delivery keeps from its first
	// attempt on, as the lease read it (retrypolicy.go): nil or an empty
	// one means the engine's.
	RetryPolicy *RetryPolicy
	// DeliverAt is a scheduled event's deliver_at, as the lease of a
	// scheduled attempt reads it (nil otherwise): its latency counts from
	// then.
	DeliverAt *time.Time
}

// AttemptStatus is the outcome of one attempt.
type AttemptStatus string

// Attempt statuses.
const (
	AttemptSucceeded AttemptStatus = "succeeded"
	AttemptFailed    AttemptStatus = "failed"
	// AttemptSkipped is an attempt the subscription's transformation
	// cancelled: nothing was sent, and the endpoint's health does not
	// count it.
	AttemptSkipped AttemptStatus = "skipped"
)

// Trigger says what made an attempt: the retry schedule or a merchant.
type Trigger string

// Attempt triggers.
const (
	TriggerScheduled Trigger = "scheduled"
	TriggerManual    Trigger = "manual"
)

// Attempt is the record of one HTTP exchange with a receiver.
type Attempt struct {
	DeliveryID   uuid.UUID
	Number       int
	Status       AttemptStatus
	Trigger      Trigger
	HTTPStatus   *int
	Error        *string
	DurationMS   int
	ResponseBody string
	AttemptedAt  time.Time
	// RequestHeaders are the headers the request carried, secrets masked
	// (dispatcher/deliver/sentheaders.go); nil when not recorded.
	RequestHeaders map[string]string
	// BatchID names the request that carried the attempt with others (a
	// batched subscription's); nil when it went alone.
	BatchID *string
	// TransformationVersion is the version of the subscription's
	// transformation the attempt ran; nil when none ran.
	TransformationVersion *int
	// RequestBody is the body a transformed attempt sent; nil for an
	// attempt not transformed (it sent the event's envelope).
	RequestBody *string
}

// Page asks for one page of a list, newest first: at most Limit rows created
// strictly before the (CreatedAt, ID) of After when After is set.
type Page struct {
	Limit int
	After *Cursor
}

// Cursor is the position of the last row of a page.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}
