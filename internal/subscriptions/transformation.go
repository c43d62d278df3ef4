package subscriptions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/transform"
)

// MaxTransformationBytes bounds a transformation's code (64 KiB): what
// is stored, compiled and cached per subscription version.
const MaxTransformationBytes = 64 << 10

// TransformationInput is a transformation as a merchant sends it: a nil
// Code keeps the stored one (an update that only turns it on or off), a
// nil Enabled is true on a new transformation and the stored value on
// an update.
type TransformationInput struct {
	Code    *string
	Enabled *bool
}

// TransformationCompiler compiles a transformation's code
// (internal/transform's Sandbox), so that code that does not compile, or
// defines no handler, is refused when it is saved rather than at each
// attempt.
type TransformationCompiler interface {
	// Compile compiles code; a *transform.Error says where it fails.
	Compile(ctx context.Context, code string) (*transform.Program, error)
}

// checkTransformation checks a transformation's code against the size
// bound and the checker; param names the object ("transformation").
func (r Rules) checkTransformation(ctx context.Context, param, code string) error {
	if r.Transformations == nil {
		return invalid.Value(param, "transformations_disabled",
			"Transformations are turned off on this server.")
	}
	if code == "" {
		return invalid.Value(param+".code", "transformation_code_required",
			param+".code must hold the handler's JavaScript source.")
	}
	if len(code) > MaxTransformationBytes {
		return invalid.Value(param+".code", "transformation_too_large", fmt.Sprintf(
			"%s.code must be at most %d bytes.", param, MaxTransformationBytes))
	}
	_, err := r.Transformations.Compile(ctx, code)
	var failed *transform.Error
	switch {
	case errors.As(err, &failed):
		return invalid.Value(param+".code", "transformation_invalid", param+".code does not compile: "+failed.Error())
	case err != nil:
		return fmt.Errorf("compile the transformation: %w", err)
	}
	return nil
}

// transformation checks a new subscription's transformation; nil for
// none.
func (g *Registry) transformation(ctx context.Context, in *TransformationInput) (*store.Transformation, error) {
	if in == nil {
		return nil, nil
	}
	code := ""
	if in.Code != nil {
		code = *in.Code
	}
	if err := g.check.rules.checkTransformation(ctx, "transformation", code); err != nil {
		return nil, err
	}
	enabled := in.Enabled == nil || *in.Enabled
	return &store.Transformation{Code: code, Enabled: enabled}, nil
}

// errTransformationPoll refuses a transformation on a poll subscription:
// its reader takes the stored envelopes in pages, and nothing is sent
// that a handler could reshape.
func errTransformationPoll() error {
	return invalid.Value("transformation", "transformation_not_supported",
		"A poll subscription's deliveries are read as stored; a transformation reshapes deliveries that are sent.")
}

// changedTransformation checks an update's transformation: in nil
// removes it; a missing code or enabled keeps the stored one. u is the
// rest of the update (its destination, when it changes).
func (g *Registry) changedTransformation(ctx context.Context, merchantID string, id uuid.UUID, in *TransformationInput, u store.SubscriptionUpdate) (*store.Transformation, error) {
	if in == nil {
		return nil, nil
	}
	cur, err := g.store.GetSubscription(ctx, merchantID, id)
	if err != nil {
		return nil, err
	}
	dest := cur.Destination
	if u.SetDestination {
		dest = u.Destination
	}
	if dest.Type() == DestinationPoll {
		return nil, errTransformationPoll()
	}
	if cur.Transformation != nil {
		if in.Code == nil {
			in.Code = &cur.Transformation.Code
		}
		if in.Enabled == nil {
			in.Enabled = &cur.Transformation.Enabled
		}
	}
	return g.transformation(ctx, in)
}

// ParseTransformation reads a transformation object as sent, by
// allow-list: {"code": string, "enabled": boolean}, either absent; null
// is nil (remove it). Its fields are named alike on both surfaces.
func ParseTransformation(param string, raw json.RawMessage) (*TransformationInput, error) {
	obj, err := objectMembers(param, "transformation", raw, fmt.Sprintf(
		`%s must be an object {"code": "function handler(webhook) { … }", "enabled": true}, or null to remove it.`, param),
		"code", "enabled")
	if err != nil || obj == nil {
		return nil, err
	}
	var in TransformationInput
	if raw, ok := obj["code"]; ok && string(raw) != "null" {
		var code string
		if err := json.Unmarshal(raw, &code); err != nil {
			return nil, invalid.Value(param+".code", "transformation_invalid", param+".code must be a string of JavaScript.")
		}
		in.Code = &code
	}
	if raw, ok := obj["enabled"]; ok && string(raw) != "null" {
		var enabled bool
		if err := json.Unmarshal(raw, &enabled); err != nil {
			return nil, invalid.Value(param+".enabled", "transformation_invalid", param+".enabled must be true or false.")
		}
		in.Enabled = &enabled
	}
	return &in, nil
}

// TransformationView is a transformation as a read shows it; nil for
// none.
func TransformationView(t *store.Transformation) map[string]any {
	if t == nil {
		return nil
	}
	return map[string]any{"code": t.Code, "enabled": t.Enabled, "version": t.Version}
}
