// Package subscriptions holds the rules and operations of webhook
// subscriptions: what a target URL, an events list, a description and
// metadata may be, and how a subscription is created, changed and given a
// new signing secret. It knows no HTTP: a broken rule is an *invalid.Error,
// which each surface renders in its own format.
package subscriptions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/customheaders"
	"github.com/webhookd/webhookd/internal/filter"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// Store is what the Registry needs of the database's subscriptions.
type Store interface {
	// CreateSubscription stores a subscription and its first sealed secret,
	// or fails with store.ErrSubscriptionLimit when the merchant already
	// holds n.Limit subscriptions.
	CreateSubscription(ctx context.Context, n store.NewSubscription, sealedSecret []byte) (store.Subscription, error)
	// UpdateSubscription applies u to the merchant's subscription id.
	UpdateSubscription(ctx context.Context, merchantID string, id uuid.UUID, u store.SubscriptionUpdate) (store.Subscription, error)
	// RotateSigningSecret persists the rotation decide makes of the
	// secrets of the merchant's subscription id, sealedSecret the new one
	// and publicKey its public key (ed25519; nil for none).
	RotateSigningSecret(ctx context.Context, merchantID string, id uuid.UUID, sealedSecret []byte, publicKey *string, decide store.RotationRule) (store.Subscription, error)
	// GetSubscription reads the merchant's subscription id.
	GetSubscription(ctx context.Context, merchantID string, id uuid.UUID) (store.Subscription, error)
}

// ListenerStore is what the Registry needs of the database's listeners.
type ListenerStore interface {
	// CreateListener stores a listener subscription and its sealed secret,
	// or fails with store.ErrListenerLimit.
	CreateListener(ctx context.Context, n store.NewListener, sealedSecret []byte) (store.Listener, error)
}

// Draft is a subscription as a merchant asks for it, before any rule is
// checked. A nil URL or Events is absent.
type Draft struct {
	URL         *string
	Events      []string
	Description *string
	Metadata    map[string]string
	// RateLimit caps the deliveries per second (nil: none).
	RateLimit *int
	// Ordering is the ordering as the API took it (ParseOrdering); nil
	// or empty is none.
	Ordering []byte
	// Filter is the filter expression; nil for none.
	Filter *string
	// Headers are the extra request headers; nil for none.
	Headers map[string]string
	// Authentication is how deliveries authenticate to the endpoint
	// beyond their signature; nil for none.
	Authentication *AuthenticationInput
	// SignatureScheme is "hmac_sha256" (nil: the default) or "ed25519".
	SignatureScheme *string
	// Encryption is the public JWK bodies are encrypted to, as sent; nil
	// for none.
	Encryption []byte
	// TraceContext turns the deliveries' traceparent header off (false);
	// nil: on.
	TraceContext *bool
	// PayloadStyle is "full" or "thin"; nil is full.
	PayloadStyle *string
	// Batch is the batch as the API took it (ParseBatch); nil is none.
	Batch *store.Batch
	// Destination is where deliveries go, as sent (ParseDestination);
	// nil or empty: the HTTP endpoint URL.
	Destination []byte
	// Transformation reshapes each delivery before it is sent; nil for
	// none.
	Transformation *TransformationInput
	// RetryPolicy is the retry policy as the API took it
	// (ParseRetryPolicy); nil is the engine's.
	RetryPolicy *store.RetryPolicy
}

// Change is an update of a subscription: nil fields are left as they are.
// SetDescription tells a description to clear (nil) from one left alone.
type Change struct {
	URL            *string
	Events         []string
	SetDescription bool
	Description    *string
	Metadata       map[string]string
	Status         *string
	// SetRateLimit applies RateLimit (nil clears it).
	SetRateLimit bool
	RateLimit    *int
	// Ordering, when not nil, replaces the ordering (ParseOrdering).
	Ordering []byte
	// SetFilter tells a filter to set (or clear, nil) from one left alone.
	SetFilter bool
	Filter    *string
	// SetHeaders tells headers to replace (or clear, nil) from ones left
	// alone: an update replaces the whole map.
	SetHeaders bool
	Headers    map[string]string
	// SetAuthentication tells an authentication to set, replace (or
	// remove, nil) from one left alone.
	SetAuthentication bool
	Authentication    *AuthenticationInput
	// SignatureScheme, when not nil, must be the subscription's: it is
	// chosen at creation.
	SignatureScheme *string
	// SetEncryption tells an encryption key to set (or remove, nil) from
	// one left alone.
	SetEncryption bool
	Encryption    []byte
	// TraceContext, when not nil, turns the traceparent header on or off.
	TraceContext *bool
	// PayloadStyle, when not nil, replaces the payload style.
	PayloadStyle *string
	// SetBatch tells a batch to set (or remove, nil) from one left alone.
	SetBatch bool
	Batch    *store.Batch
	// Destination, when not nil, replaces the destination
	// (ParseDestination); an HTTP endpoint again needs URL beside it.
	Destination []byte
	// SetTransformation tells a transformation to set, change (or
	// remove, nil) from one left alone.
	SetTransformation bool
	Transformation    *TransformationInput
	// SetRetryPolicy tells a retry policy to set (or return to the
	// engine's, nil) from one left alone.
	SetRetryPolicy bool
	RetryPolicy    *store.RetryPolicy
}

// Registry creates and changes webhook subscriptions under Rules, and makes
// and seals their signing secrets.
type Registry struct {
	store     Store
	listeners ListenerStore
	check     checker
	masterKey []byte
	// filters compiles filter expressions; filtersErr says why it could
	// not be built (then every filter is refused with it).
	filters    *filter.Compiler
	filtersErr error
}

// NewRegistry is a Registry over the subscriptions st and the listeners.
// masterKey (32 bytes) seals the signing secrets; a bad one fails each
// operation that makes a secret, not this constructor, so that a server
// with a bad key still serves everything else.
func NewRegistry(st Store, listeners ListenerStore, masterKey []byte, rules Rules) *Registry {
	filters, err := filter.NewCompiler()
	return &Registry{store: st, listeners: listeners, check: newChecker(rules), masterKey: masterKey,
		filters: filters, filtersErr: err}
}

// Create checks d, makes and seals the first signing secret of its
// scheme, and stores both. It returns what the merchant verifies with:
// the secret in clear (the caller shows it once and forgets it), or for
// ed25519 the public key (the private key is never shown).
func (g *Registry) Create(ctx context.Context, merchantID string, d Draft) (store.Subscription, string, error) {
	n, err := g.checkDraft(ctx, merchantID, d)
	if err != nil {
		return store.Subscription{}, "", err
	}
	secret, publicKey, sealed, err := g.newSigningSecret(signer.Scheme(n.SignatureScheme))
	if err != nil {
		return store.Subscription{}, "", err
	}
	n.SigningPublicKey = publicKey
	n.Limit = g.check.rules.maxSubscriptions()
	// The store's errors already say what failed and on which row.
	sub, err := g.store.CreateSubscription(ctx, n, sealed)
	if errors.Is(err, store.ErrSubscriptionLimit) {
		// The cap has no field of its own; url names the subscription's
		// target, the one thing each subscription adds.
		return store.Subscription{}, "", invalid.Value("url", "subscriptions_limit", fmt.Sprintf(
			"A merchant may hold at most %d webhook subscriptions; delete one before creating another.", n.Limit))
	}
	if err != nil {
		return store.Subscription{}, "", err
	}
	return sub, shown(secret, publicKey), nil
}

// checkDraft applies the rules to every field of d, in the order the
// fields are documented, so that the same body always names the same one.
func (g *Registry) checkDraft(ctx context.Context, merchantID string, d Draft) (store.NewSubscription, error) {
	dest, url, err := g.destinationTarget(d.Destination, d.URL)
	if err != nil {
		return store.NewSubscription{}, err
	}
	if d.Batch != nil && !g.check.batches(dest) {
		return store.NewSubscription{}, errBatchNotHTTP()
	}
	events, err := g.check.events("events", d.Events)
	if err != nil {
		return store.NewSubscription{}, err
	}
	if err := checkDescription("description", d.Description); err != nil {
		return store.NewSubscription{}, err
	}
	if err := checkMetadata("metadata", d.Metadata); err != nil {
		return store.NewSubscription{}, err
	}
	if err := CheckRateLimit("rate_limit", d.RateLimit); err != nil {
		return store.NewSubscription{}, err
	}
	var orderingKey *string
	if len(d.Ordering) > 0 {
		if orderingKey, err = ParseOrdering("ordering", d.Ordering); err != nil {
			return store.NewSubscription{}, err
		}
	}
	if err := g.checkFilter(d.Filter); err != nil {
		return store.NewSubscription{}, err
	}
	if err := customheaders.Check("headers", d.Headers); err != nil {
		return store.NewSubscription{}, err
	}
	sealed, err := g.sealHeaders(d.Headers)
	if err != nil {
		return store.NewSubscription{}, err
	}
	auth, err := g.sealAuthentication(d.Authentication)
	if err != nil {
		return store.NewSubscription{}, err
	}
	scheme, err := checkSignatureScheme("signature_scheme", d.SignatureScheme)
	if err != nil {
		return store.NewSubscription{}, err
	}
	encryption, err := checkEncryption("encryption.public_key", d.Encryption)
	if err != nil {
		return store.NewSubscription{}, err
	}
	style := store.PayloadFull
	if d.PayloadStyle != nil {
		if err := CheckPayloadStyle("payload_style", *d.PayloadStyle); err != nil {
			return store.NewSubscription{}, err
		}
		style = *d.PayloadStyle
	}
	if dest.Type() == DestinationPoll && d.Transformation != nil {
		return store.NewSubscription{}, errTransformationPoll()
	}
	if dest.Type() == DestinationPoll && d.RetryPolicy != nil {
		return store.NewSubscription{}, errRetryPolicyPoll("retry_policy")
	}
	transformation, err := g.transformation(ctx, d.Transformation)
	if err != nil {
		return store.NewSubscription{}, err
	}
	return store.NewSubscription{MerchantID: merchantID, URL: url, Events: events, Description: d.Description, Metadata: d.Metadata,
		RateLimit: d.RateLimit, OrderingKey: orderingKey, Filter: d.Filter, SealedHeaders: sealed, Authentication: auth,
		SignatureScheme: string(scheme), EncryptionKey: encryption,
		TraceContext: d.TraceContext, PayloadStyle: style, Batch: d.Batch,
		Destination: dest, Transformation: transformation, RetryPolicy: d.RetryPolicy}, nil
}

// Update checks the fields present in c and applies them to the merchant's
// subscription id.
func (g *Registry) Update(ctx context.Context, merchantID string, id uuid.UUID, c Change) (store.Subscription, error) {
	u, err := g.checkChange(c)
	if err != nil {
		return store.Subscription{}, err
	}
	if err := g.checkSchemeUnchanged(ctx, merchantID, id, c.SignatureScheme); err != nil {
		return store.Subscription{}, err
	}
	if err := g.checkPollUnchanged(ctx, merchantID, id, u); err != nil {
		return store.Subscription{}, err
	}
	if err := g.checkBatchIsHTTP(ctx, merchantID, id, u); err != nil {
		return store.Subscription{}, err
	}
	if err := checkRetryPolicyDelivered(ctx, g.store, merchantID, id, u); err != nil {
		return store.Subscription{}, err
	}
	if err := checkURLIsHTTP(ctx, g.store, merchantID, id, u); err != nil {
		return store.Subscription{}, err
	}
	if c.SetTransformation {
		if u.Transformation, err = g.changedTransformation(ctx, merchantID, id, c.Transformation, u); err != nil {
			return store.Subscription{}, err
		}
		u.SetTransformation = true
	}
	return g.store.UpdateSubscription(ctx, merchantID, id, u)
}

// checkChange applies the rules to the fields present in c.
func (g *Registry) checkChange(c Change) (store.SubscriptionUpdate, error) {
	u := store.SubscriptionUpdate{TraceContext: c.TraceContext}
	if c.Destination != nil {
		dest, url, err := g.destinationTarget(c.Destination, c.URL)
		if err != nil {
			return u, err
		}
		u.SetDestination, u.Destination, u.URL = true, dest, &url
	} else if c.URL != nil {
		url, err := g.check.url("url", *c.URL)
		if err != nil {
			return u, err
		}
		u.URL = &url
	}
	if c.Events != nil {
		events, err := g.check.events("events", c.Events)
		if err != nil {
			return u, err
		}
		u.Events = events
	}
	if c.SetDescription {
		if err := checkDescription("description", c.Description); err != nil {
			return u, err
		}
		u.SetDescription, u.Description = true, c.Description
	}
	if c.Status != nil {
		if err := CheckStatus("status", *c.Status); err != nil {
			return u, err
		}
		status := store.SubscriptionStatus(*c.Status)
		u.Status = &status
	}
	if c.Metadata != nil {
		if err := checkMetadata("metadata", c.Metadata); err != nil {
			return u, err
		}
		u.Metadata = c.Metadata
	}
	if c.SetRateLimit {
		if err := CheckRateLimit("rate_limit", c.RateLimit); err != nil {
			return u, err
		}
		u.SetRateLimit, u.RateLimit = true, c.RateLimit
	}
	if c.Ordering != nil {
		key, err := ParseOrdering("ordering", c.Ordering)
		if err != nil {
			return u, err
		}
		u.SetOrderingKey, u.OrderingKey = true, key
	}
	if c.SetFilter {
		if err := g.checkFilter(c.Filter); err != nil {
			return u, err
		}
		u.SetFilter, u.Filter = true, c.Filter
	}
	if c.SetHeaders {
		if err := customheaders.Check("headers", c.Headers); err != nil {
			return u, err
		}
		sealed, err := g.sealHeaders(c.Headers)
		if err != nil {
			return u, err
		}
		u.SetHeaders, u.SealedHeaders = true, sealed
	}
	if c.SetAuthentication {
		auth, err := g.sealAuthentication(c.Authentication)
		if err != nil {
			return u, err
		}
		u.SetAuthentication, u.Authentication = true, auth
	}
	if c.SetEncryption {
		jwk, err := checkEncryption("encryption.public_key", c.Encryption)
		if err != nil {
			return u, err
		}
		u.SetEncryptionKey, u.EncryptionKey = true, jwk
	}
	if c.PayloadStyle != nil {
		if err := CheckPayloadStyle("payload_style", *c.PayloadStyle); err != nil {
			return u, err
		}
		u.PayloadStyle = c.PayloadStyle
	}
	u.SetBatch, u.Batch = c.SetBatch, c.Batch
	u.SetRetryPolicy, u.RetryPolicy = c.SetRetryPolicy, c.RetryPolicy
	return u, nil
}

// errBatchNotHTTP refuses a batch on a subscription whose destination's
// kind sends one message per delivery (its Metadata.Batches is false: a
// broker's message is one delivery) or on a poll subscription, whose
// reader pages by itself. (An update that gives a batched subscription
// such a destination keeps the batch stored, and its deliveries go
// alone.)
func errBatchNotHTTP() error {
	return invalid.Value("batch", "batch_not_http",
		"batch is for HTTP endpoints and the destinations that store a batch as one object (s3); this destination receives one message per delivery, and a poll subscription is read in pages.")
}

// checkBatchIsHTTP refuses an update that sets a batch on a subscription
// that has, or is given, a destination that does not batch, as a create
// with both is refused.
func (g *Registry) checkBatchIsHTTP(ctx context.Context, merchantID string, id uuid.UUID, u store.SubscriptionUpdate) error {
	if !u.SetBatch || u.Batch == nil {
		return nil
	}
	if u.SetDestination {
		if !g.check.batches(u.Destination) {
			return errBatchNotHTTP()
		}
		return nil
	}
	cur, err := g.store.GetSubscription(ctx, merchantID, id)
	if err != nil {
		return err
	}
	if !g.check.batches(cur.Destination) {
		return errBatchNotHTTP()
	}
	return nil
}

// checkFilter compiles a filter expression (nil: none).
func (g *Registry) checkFilter(expr *string) error {
	if expr != nil && g.filtersErr != nil {
		return fmt.Errorf("filter: %w", g.filtersErr)
	}
	return checkFilter(g.filters, "filter", expr)
}

// sealHeaders seals checked extra headers for storage (nil: none).
func (g *Registry) sealHeaders(h map[string]string) ([]byte, error) {
	if len(h) == 0 {
		return nil, nil
	}
	sealer, err := signer.NewSealer(g.masterKey)
	if err != nil {
		return nil, fmt.Errorf("headers: %w", err)
	}
	return sealer.SealHeaders(h)
}

// MaskedHeaders is what a read shows of a subscription's extra headers:
// every name, each value masked (see MaskedValue); nil when it has none.
func (g *Registry) MaskedHeaders(sub store.Subscription) (map[string]string, error) {
	if sub.SealedHeaders == nil {
		return nil, nil
	}
	sealer, err := signer.NewSealer(g.masterKey)
	if err != nil {
		return nil, fmt.Errorf("headers of %s: %w", sub.ID, err)
	}
	h, err := sealer.OpenHeaders(sub.SealedHeaders)
	if err != nil {
		return nil, fmt.Errorf("headers of %s: %w", sub.ID, err)
	}
	for name, v := range h {
		h[name] = MaskedValue(v)
	}
	return h, nil
}

// RotateSecret makes a new current secret, of the subscription's scheme,
// for the merchant's subscription id and returns the subscription with
// what the merchant verifies with (as Create does: the secret in clear, or
// the new public key); the previous secret keeps signing for
// signer.RotationOverlap.
func (g *Registry) RotateSecret(ctx context.Context, merchantID string, id uuid.UUID) (store.Subscription, string, error) {
	cur, err := g.store.GetSubscription(ctx, merchantID, id)
	if err != nil {
		return store.Subscription{}, "", err
	}
	secret, publicKey, sealed, err := g.newSigningSecret(signer.Scheme(SignatureScheme(cur)))
	if err != nil {
		return store.Subscription{}, "", err
	}
	sub, err := g.store.RotateSigningSecret(ctx, merchantID, id, sealed, publicKey, Rotation(secret))
	if err != nil {
		return store.Subscription{}, "", err
	}
	return sub, shown(secret, publicKey), nil
}

// Rotation is the rule of a rotation to newSecret, which the store applies
// under the subscription's lock: signer.Rotate at now, the new secret
// dated after the newest one stored should another instance's clock run
// ahead of the store's.
func Rotation(newSecret string) store.RotationRule {
	return func(current []signer.Secret, now time.Time) (signer.Rotation, error) {
		for _, sec := range current {
			if sec.CreatedAt.After(now) {
				now = sec.CreatedAt.Add(time.Microsecond)
			}
		}
		return signer.Rotate(current, now, newSecret)
	}
}
