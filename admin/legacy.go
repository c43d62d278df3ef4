package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// legacyHandlers serve POST /api/service/webhook-subscription/create,
// update and delete (DESIGN.md "Legacy webhook subscription"). They change
// the same subscriptions as the /v1 routes, through the same
// subscriptionChanges, so a subscription made on one surface is the same
// object on the other; they are separate because their bodies are
// camelCase, their ids travel in the body and their errors have the
// legacy shape.
type legacyHandlers struct {
	changes subscriptionChanges
}

// legacySubscriptionJSON is the legacy resource.
type legacySubscriptionJSON struct {
	ID          string                   `json:"id"`
	URL         string                   `json:"url"`
	Events      []string                 `json:"events"`
	Description *string                  `json:"description"`
	Status      store.SubscriptionStatus `json:"status"`
	Metadata    map[string]string        `json:"metadata"`
	Filter      *string                  `json:"filter"`
	Headers     map[string]string        `json:"headers"`
	// Secret is only in the answer of create.
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	RateLimit *int      `json:"rateLimit"`
	Ordering  any       `json:"ordering"`
	// Authentication is the summary of the endpoint authentication, in
	// camelCase (no key); null for none.
	Authentication authenticationJSON `json:"authentication"`
	// SignatureScheme, SigningPublicKey(s) and Encryption are how
	// deliveries are signed and encrypted (admin/signing.go).
	SignatureScheme   string         `json:"signatureScheme"`
	SigningPublicKey  *string        `json:"signingPublicKey"`
	SigningPublicKeys []string       `json:"signingPublicKeys"`
	Encryption        encryptionJSON `json:"encryption"`
	TraceContext      bool           `json:"traceContext"`
	PayloadStyle      string         `json:"payloadStyle"`
	Batch             map[string]int `json:"batch"`
	// Destination is where deliveries go, in camelCase (credentials
	// masked); null for an HTTP endpoint.
	Destination map[string]any `json:"destination"`
	// Transformation is as on /v1, its fields one word each.
	Transformation map[string]any `json:"transformation"`
	// RetryPolicy is as on /v1, its timeout timeoutSeconds.
	RetryPolicy map[string]any `json:"retryPolicy"`
}

// view is the legacy resource, headers masked.
func (h legacyHandlers) view(ctx context.Context, sub store.Subscription) legacySubscriptionJSON {
	rateLimit, ordering := controlsView(sub)
	s := h.changes.signingView(ctx, sub)
	return legacySubscriptionJSON{
		SignatureScheme: s.scheme, SigningPublicKey: s.publicKey, SigningPublicKeys: s.publicKeys, Encryption: s.encryption,
		RateLimit: rateLimit, Ordering: ordering,
		ID: sub.ID.String(), URL: sub.URL, Events: sub.Events, Description: sub.Description,
		Status: sub.Status, Metadata: sub.Metadata, CreatedAt: sub.CreatedAt.UTC(), UpdatedAt: sub.UpdatedAt.UTC(),
		Filter: sub.Filter, Headers: h.changes.maskedHeaders(ctx, sub),
		Authentication: h.changes.authenticationView(ctx, sub.Authentication), TraceContext: sub.TraceContext,
		PayloadStyle: sub.PayloadStyle, Batch: batchView(ctx, sub),
		Destination:    destinationView(ctx, sub.Destination),
		Transformation: subscriptions.TransformationView(sub.Transformation),
		RetryPolicy:    retryPolicyView(ctx, sub),
	}
}

// create answers 200 with the new subscription and, this once, its secret.
func (h legacyHandlers) create(w http.ResponseWriter, r *http.Request) error {
	var legacy struct {
		URL         *string           `json:"url"`
		Events      []string          `json:"events"`
		Description optionalString    `json:"description"`
		Metadata    map[string]string `json:"metadata"`
		RateLimit   optionalInt       `json:"rateLimit"`
		Ordering    rawField          `json:"ordering"`
		Filter      optionalString    `json:"filter"`
		Headers     optionalHeaders   `json:"headers"`
		// Authentication's fields are camelCase (authenticationInput).
		Authentication rawField `json:"authentication"`
		// SignatureScheme as on /v1; Encryption's field is camelCase
		// (encryptionInput).
		SignatureScheme *string  `json:"signatureScheme"`
		Encryption      rawField `json:"encryption"`
		TraceContext    *bool    `json:"traceContext"`
		PayloadStyle    *string  `json:"payloadStyle"`
		// Batch's fields are camelCase (batchInput).
		Batch rawField `json:"batch"`
		// Destination's fields are camelCase (destinationInput).
		Destination rawField `json:"destination"`
		// Transformation's fields are one word each (code, enabled).
		Transformation rawField `json:"transformation"`
		// RetryPolicy's timeout is timeoutSeconds (retryPolicyInput).
		RetryPolicy rawField `json:"retryPolicy"`
	}
	if err := decodeJSON(r, &legacy); err != nil {
		return err
	}
	draft, err := subscriptionInput(legacy).draft(r.Context())
	if err != nil {
		return err
	}
	sub, secret, err := h.changes.create(r.Context(), principalOf(r.Context()).Merchant.ID, draft)
	if err != nil {
		return err
	}
	v := h.view(r.Context(), sub)
	v.Secret = secret
	writeJSON(w, http.StatusOK, v)
	return nil
}

// update changes the subscription the body's id names.
func (h legacyHandlers) update(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		ID          *string           `json:"id"`
		URL         *string           `json:"url"`
		Events      []string          `json:"events"`
		Description optionalString    `json:"description"`
		Metadata    map[string]string `json:"metadata"`
		Status      *string           `json:"status"`
		RateLimit   optionalInt       `json:"rateLimit"`
		Ordering    rawField          `json:"ordering"`
		Filter      optionalString    `json:"filter"`
		Headers     optionalHeaders   `json:"headers"`
		// Authentication's fields are camelCase (authenticationInput).
		Authentication rawField `json:"authentication"`
		// SignatureScheme as on /v1; Encryption's field is camelCase
		// (encryptionInput).
		SignatureScheme *string  `json:"signatureScheme"`
		Encryption      rawField `json:"encryption"`
		TraceContext    *bool    `json:"traceContext"`
		PayloadStyle    *string  `json:"payloadStyle"`
		// Batch's fields are camelCase (batchInput).
		Batch rawField `json:"batch"`
		// Destination's fields are camelCase (destinationInput).
		Destination rawField `json:"destination"`
		// Transformation's fields are one word each (code, enabled).
		Transformation rawField `json:"transformation"`
		// RetryPolicy's timeout is timeoutSeconds (retryPolicyInput).
		RetryPolicy rawField `json:"retryPolicy"`
	}
	if err := decodeJSON(r, &in); err != nil {
		return err
	}
	id, err := legacyID(in.ID)
	if err != nil {
		return err
	}
	patch := subscriptionPatch{URL: in.URL, Events: in.Events, Description: in.Description, Metadata: in.Metadata, Status: in.Status,
		RateLimit: in.RateLimit, Ordering: in.Ordering,
		Filter: in.Filter, Headers: in.Headers, Authentication: in.Authentication,
		SignatureScheme: in.SignatureScheme, Encryption: in.Encryption, TraceContext: in.TraceContext,
		PayloadStyle: in.PayloadStyle, Batch: in.Batch, Destination: in.Destination, Transformation: in.Transformation,
		RetryPolicy: in.RetryPolicy}
	change, err := patch.change(r.Context())
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

// delete deletes the subscription the body's id names.
func (h legacyHandlers) delete(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		ID *string `json:"id"`
	}
	if err := decodeJSON(r, &in); err != nil {
		return err
	}
	id, err := legacyID(in.ID)
	if err != nil {
		return err
	}
	if err := h.changes.delete(r.Context(), principalOf(r.Context()).Merchant.ID, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id.String(), "deleted": true})
	return nil
}

// legacyID reads the id field that the legacy update and delete bodies
// carry instead of a path parameter.
func legacyID(raw *string) (uuid.UUID, error) {
	if raw == nil {
		return uuid.Nil, errMissing("id")
	}
	return parseID(*raw)
}
