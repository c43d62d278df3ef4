package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// subscriptionReads is what the subscription routes read.
type subscriptionReads interface {
	// GetSubscription reads the merchant's subscription.
	GetSubscription(ctx context.Context, merchantID string, id uuid.UUID) (store.Subscription, error)
	// ListSubscriptions reads a page of the merchant's subscriptions.
	ListSubscriptions(ctx context.Context, merchantID string, f store.SubscriptionFilter, p store.Page) ([]store.Subscription, error)
}

// subscriptionHandlers serve /v1/webhook_subscriptions: create, list,
// read, update, delete and rotate a merchant's subscriptions. They are
// separate from the legacy routes, which change the same subscriptions
// through the same subscriptionChanges but answer camelCase, and from the
// endpoint routes, which read secrets and health and need the checker.
type subscriptionHandlers struct {
	changes subscriptionChanges
	// reads is where list and get read, and polls where they read poll
	// subscriptions' lines (the replica when there is one).
	reads subscriptionReads
	polls pollStateReads
	pages pager
}

// subscriptionJSON is the Banking resource (DESIGN.md "Resources").
type subscriptionJSON struct {
	ID          uuid.UUID                `json:"id"`
	Type        string                   `json:"type"`
	URL         string                   `json:"url"`
	Events      []string                 `json:"events"`
	Description *string                  `json:"description"`
	Status      store.SubscriptionStatus `json:"status"`
	Metadata    map[string]string        `json:"metadata"`
	Health      healthJSON               `json:"health"`
	CreatedAt   time.Time                `json:"created_at"`
	UpdatedAt   time.Time                `json:"updated_at"`
	RateLimit   *int                     `json:"rate_limit"`
	Ordering    any                      `json:"ordering"`
	// Filter and Headers are the delivery controls (admin/controls.go);
	// Headers are masked.
	Filter  *string           `json:"filter"`
	Headers map[string]string `json:"headers"`
	// Authentication is the summary of the endpoint authentication (no
	// key); null for none.
	Authentication authenticationJSON `json:"authentication"`
	// SignatureScheme, SigningPublicKey(s) and Encryption are how
	// deliveries are signed and encrypted (admin/signing.go).
	SignatureScheme   string         `json:"signature_scheme"`
	SigningPublicKey  *string        `json:"signing_public_key"`
	SigningPublicKeys []string       `json:"signing_public_keys"`
	Encryption        encryptionJSON `json:"encryption"`
	// TraceContext: deliveries carry a traceparent header (docs/tracing.md).
	TraceContext bool `json:"trace_context"`
	// PayloadStyle and Batch are the shape of the deliveries
	// (admin/shape.go).
	PayloadStyle string         `json:"payload_style"`
	Batch        map[string]int `json:"batch"`
	// Destination is where deliveries go (credentials masked); null for
	// an HTTP endpoint, url.
	Destination map[string]any `json:"destination"`
	// Transformation is the merchant's handler reshaping each delivery
	// (docs/transformations.md); null for none.
	Transformation map[string]any `json:"transformation"`
	// RetryPolicy is its own retry schedule and attempt timeout
	// (admin/retrypolicy.go); null for the engine's.
	RetryPolicy map[string]any `json:"retry_policy"`
	// Poll is a poll subscription's line (admin/poll.go); absent for the
	// others.
	Poll *pollStateJSON `json:"poll,omitempty"`
	// Secret is only in the answers of create and rotate_secret: the
	// whsec_ secret, or for ed25519 the whpk_ public key.
	Secret string `json:"secret,omitempty"`
}

type healthJSON struct {
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
}

// subscriptionView is the Banking resource, headers left out (see view).
func subscriptionView(sub store.Subscription) subscriptionJSON {
	rateLimit, ordering := controlsView(sub)
	return subscriptionJSON{
		RateLimit: rateLimit, Ordering: ordering,
		ID: sub.ID, Type: "webhook_subscription", URL: sub.URL, Events: sub.Events,
		Description: sub.Description, Status: sub.Status, Metadata: sub.Metadata,
		Health: healthJSON{
			ConsecutiveFailures: sub.Health.ConsecutiveFailures,
			LastSuccessAt:       utcPtr(sub.Health.LastSuccessAt), LastFailureAt: utcPtr(sub.Health.LastFailureAt),
		},
		CreatedAt: sub.CreatedAt.UTC(), UpdatedAt: sub.UpdatedAt.UTC(), Filter: sub.Filter,
		TraceContext: sub.TraceContext,
		PayloadStyle: sub.PayloadStyle,
	}
}

// view is the Banking resource with its headers masked.
func (h subscriptionHandlers) view(ctx context.Context, sub store.Subscription) subscriptionJSON {
	return h.viewWith(ctx, sub, h.pollLines(ctx, sub))
}

// viewWith is view with the poll lines already read (pollLines), so that a
// page of subscriptions reads them in one query.
func (h subscriptionHandlers) viewWith(ctx context.Context, sub store.Subscription, lines map[uuid.UUID]store.PollState) subscriptionJSON {
	v := subscriptionView(sub)
	v.Headers = h.changes.maskedHeaders(ctx, sub)
	v.Authentication = h.changes.authenticationView(ctx, sub.Authentication)
	s := h.changes.signingView(ctx, sub)
	v.SignatureScheme, v.SigningPublicKey, v.SigningPublicKeys, v.Encryption = s.scheme, s.publicKey, s.publicKeys, s.encryption
	v.Batch = batchView(ctx, sub)
	v.Destination = destinationView(ctx, sub.Destination)
	v.Transformation = subscriptions.TransformationView(sub.Transformation)
	v.RetryPolicy = retryPolicyView(ctx, sub)
	v.Poll = pollView(sub, lines)
	return v
}

// subscriptionInput is the body of create, and the fields of update. Both
// surfaces use it: their names are the same in snake_case and camelCase.
type subscriptionInput struct {
	URL         *string           `json:"url"`
	Events      []string          `json:"events"`
	Description optionalString    `json:"description"`
	Metadata    map[string]string `json:"metadata"`
	RateLimit   optionalInt       `json:"rate_limit"`
	Ordering    rawField          `json:"ordering"`
	Filter      optionalString    `json:"filter"`
	Headers     optionalHeaders   `json:"headers"`
	// Authentication is read by authenticationInput.
	Authentication rawField `json:"authentication"`
	// SignatureScheme is "hmac_sha256" (absent: the default) or
	// "ed25519"; Encryption is read by encryptionInput.
	SignatureScheme *string  `json:"signature_scheme"`
	Encryption      rawField `json:"encryption"`
	TraceContext    *bool    `json:"trace_context"`
	PayloadStyle    *string  `json:"payload_style"`
	// Batch is read by batchInput.
	Batch rawField `json:"batch"`
	// Destination is read by destinationInput.
	Destination rawField `json:"destination"`
	// Transformation is read by transformationInput.
	Transformation rawField `json:"transformation"`
	// RetryPolicy is read by retryPolicyInput.
	RetryPolicy rawField `json:"retry_policy"`
}

// subscriptionPatch is an update: every field is optional. It repeats the
// fields of subscriptionInput rather than embedding it, because the JSON
// decoder would name a bad field after the embedded Go type.
type subscriptionPatch struct {
	URL         *string           `json:"url"`
	Events      []string          `json:"events"`
	Description optionalString    `json:"description"`
	Metadata    map[string]string `json:"metadata"`
	Status      *string           `json:"status"`
	RateLimit   optionalInt       `json:"rate_limit"`
	Ordering    rawField          `json:"ordering"`
	Filter      optionalString    `json:"filter"`
	Headers     optionalHeaders   `json:"headers"`
	// Authentication is read by authenticationInput.
	Authentication rawField `json:"authentication"`
	// SignatureScheme may only repeat the subscription's; Encryption is
	// read by encryptionInput.
	SignatureScheme *string  `json:"signature_scheme"`
	Encryption      rawField `json:"encryption"`
	TraceContext    *bool    `json:"trace_context"`
	PayloadStyle    *string  `json:"payload_style"`
	// Batch is read by batchInput.
	Batch rawField `json:"batch"`
	// Destination is read by destinationInput.
	Destination rawField `json:"destination"`
	// Transformation is read by transformationInput.
	Transformation rawField `json:"transformation"`
	// RetryPolicy is read by retryPolicyInput.
	RetryPolicy rawField `json:"retry_policy"`
}

// optionalString tells a field that is absent from one that is null, so
// that an update can clear the description.
type optionalString struct {
	Set   bool
	Value *string
}

// UnmarshalJSON records that the field was present; null clears it.
func (o *optionalString) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Value = nil
		return nil
	}
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	o.Value = &v
	return nil
}

// parseID reads a resource id. A malformed id names no resource, so it is
// 404 like an unknown one.
func parseID(raw string) (uuid.UUID, error) {
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, errNotFound
	}
	return id, nil
}

// draft is the domain's form of a create body; ctx names the surface
// (the authentication's field names).
func (in subscriptionInput) draft(ctx context.Context) (subscriptions.Draft, error) {
	_, auth, err := authenticationInput(ctx, in.Authentication)
	if err != nil {
		return subscriptions.Draft{}, err
	}
	_, jwk, err := encryptionInput(ctx, in.Encryption)
	if err != nil {
		return subscriptions.Draft{}, err
	}
	_, batch, err := batchInput(ctx, in.Batch)
	if err != nil {
		return subscriptions.Draft{}, err
	}
	destination, err := destinationInput(ctx, in.Destination)
	if err != nil {
		return subscriptions.Draft{}, err
	}
	_, transformation, err := transformationInput(in.Transformation)
	if err != nil {
		return subscriptions.Draft{}, err
	}
	_, policy, err := retryPolicyInput(ctx, in.RetryPolicy)
	if err != nil {
		return subscriptions.Draft{}, err
	}
	return subscriptions.Draft{URL: in.URL, Events: in.Events, Description: in.Description.Value, Metadata: in.Metadata,
		RateLimit: in.RateLimit.Value, Ordering: in.Ordering.bytes(),
		Filter: in.Filter.Value, Headers: in.Headers.Value, Authentication: auth,
		SignatureScheme: in.SignatureScheme, Encryption: jwk, TraceContext: in.TraceContext,
		PayloadStyle: in.PayloadStyle, Batch: batch, Destination: destination, Transformation: transformation,
		RetryPolicy: policy}, nil
}

// change is the domain's form of an update body; ctx names the surface.
func (p subscriptionPatch) change(ctx context.Context) (subscriptions.Change, error) {
	setAuth, auth, err := authenticationInput(ctx, p.Authentication)
	if err != nil {
		return subscriptions.Change{}, err
	}
	setEnc, jwk, err := encryptionInput(ctx, p.Encryption)
	if err != nil {
		return subscriptions.Change{}, err
	}
	setBatch, batch, err := batchInput(ctx, p.Batch)
	if err != nil {
		return subscriptions.Change{}, err
	}
	destination, err := destinationInput(ctx, p.Destination)
	if err != nil {
		return subscriptions.Change{}, err
	}
	setTransformation, transformation, err := transformationInput(p.Transformation)
	if err != nil {
		return subscriptions.Change{}, err
	}
	setPolicy, policy, err := retryPolicyInput(ctx, p.RetryPolicy)
	if err != nil {
		return subscriptions.Change{}, err
	}
	return subscriptions.Change{URL: p.URL, Events: p.Events, SetDescription: p.Description.Set,
		Description: p.Description.Value, Metadata: p.Metadata, Status: p.Status,
		SetRateLimit: p.RateLimit.Set, RateLimit: p.RateLimit.Value, Ordering: p.Ordering.bytes(),
		SetFilter: p.Filter.Set, Filter: p.Filter.Value, SetHeaders: p.Headers.Set, Headers: p.Headers.Value,
		SetAuthentication: setAuth, Authentication: auth,
		SignatureScheme: p.SignatureScheme, SetEncryption: setEnc, Encryption: jwk, TraceContext: p.TraceContext,
		PayloadStyle: p.PayloadStyle, SetBatch: setBatch, Batch: batch, Destination: destination,
		SetTransformation: setTransformation, Transformation: transformation,
		SetRetryPolicy: setPolicy, RetryPolicy: policy}, nil
}

// create answers 201 with the new subscription and, this once, its secret.
func (h subscriptionHandlers) create(w http.ResponseWriter, r *http.Request) error {
	var in subscriptionInput
	if err := decodeJSON(r, &in); err != nil {
		return err
	}
	draft, err := in.draft(r.Context())
	if err != nil {
		return err
	}
	sub, secret, err := h.changes.create(r.Context(), principalOf(r.Context()).Merchant.ID, draft)
	if err != nil {
		return err
	}
	v := h.view(r.Context(), sub)
	v.Secret = secret
	writeJSON(w, http.StatusCreated, v)
	return nil
}

// list answers a page of the merchant's subscriptions, newest first.
func (h subscriptionHandlers) list(w http.ResponseWriter, r *http.Request) error {
	p, err := h.pages.listPage(r, "status")
	if err != nil {
		return err
	}
	status := r.URL.Query().Get("status")
	if r.URL.Query().Has("status") {
		if err := subscriptions.CheckStatus("status", status); err != nil {
			return err
		}
	}
	subs, err := h.reads.ListSubscriptions(r.Context(), principalOf(r.Context()).Merchant.ID, store.SubscriptionFilter{Status: store.SubscriptionStatus(status)}, p)
	if err != nil {
		return err
	}
	lines := h.pollLines(r.Context(), subs...)
	writeList(h.pages, w, r, p, subs, nil, func(sub store.Subscription) store.Cursor {
		return store.Cursor{CreatedAt: sub.CreatedAt, ID: sub.ID.String()}
	}, func(sub store.Subscription) subscriptionJSON { return h.viewWith(r.Context(), sub, lines) })
	return nil
}

// get answers one subscription.
func (h subscriptionHandlers) get(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	sub, err := h.reads.GetSubscription(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.view(r.Context(), sub))
	return nil
}

// update changes the fields the body names.
func (h subscriptionHandlers) update(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var p subscriptionPatch
	if err := decodeJSON(r, &p); err != nil {
		return err
	}
	change, err := p.change(r.Context())
	if err != nil {
		return err
	}
	sub, err := h.changes.update(r.Context(), principalOf(r.Context()).Merchant.ID, id, change)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.view(r.Context(), sub))
	return nil
}

// delete deletes a subscription and drops its waiting work.
func (h subscriptionHandlers) delete(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := h.changes.delete(r.Context(), principalOf(r.Context()).Merchant.ID, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rotateSecret makes a new current secret and answers the subscription with
// it; the previous secret keeps signing for signer.RotationOverlap.
func (h subscriptionHandlers) rotateSecret(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := decodeNoFields(r); err != nil {
		return err
	}
	sub, secret, err := h.changes.registry.RotateSecret(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	v := h.view(r.Context(), sub)
	v.Secret = secret
	writeJSON(w, http.StatusOK, v)
	return nil
}
