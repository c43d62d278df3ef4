package admin

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/payloadschema"
	"github.com/webhookd/webhookd/internal/store"
)

// docBase is where each error code is explained.
const docBase = "https://docs.webhookd.dev/errors#"

// Error is an API error with its spec 7 code. Handlers return it (or wrap
// it); writeError renders it in the surface's format.
type Error struct {
	Status         int
	Category       string
	Code           string
	Message        string
	Param          *string
	RequiredScopes []string
	// RetryAfter, when set, is sent as the Retry-After header in seconds.
	RetryAfter int
}

// Error is the code and the message, as the API sends them.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// The categories of spec 7.
const (
	catAPI            = "api_error"
	catAuthentication = "authentication_error"
	catIdempotency    = "idempotency_error"
	catInvalidRequest = "invalid_request_error"
	catRateLimit      = "rate_limit_error"
)

// errConflict is the 409 of a request the resource's state refuses
// (disabled, running, already started…), its message saying what to do.
func errConflict(message string) *Error {
	return newError(http.StatusConflict, catInvalidRequest, "conflict", message)
}

func newError(status int, category, code, message string) *Error {
	return &Error{Status: status, Category: category, Code: code, Message: message}
}

// withParam names the offending parameter.
func (e *Error) withParam(param string) *Error {
	c := *e
	c.Param = &param
	return &c
}

func errInvalid(param, message string) *Error {
	return newError(http.StatusBadRequest, catInvalidRequest, "parameter_invalid", message).withParam(param)
}

func errMissing(param string) *Error {
	return newError(http.StatusBadRequest, catInvalidRequest, "parameter_missing", param+" is required.").withParam(param)
}

func errValidation(param, message string) *Error {
	e := newError(http.StatusBadRequest, catInvalidRequest, "validation_error", message)
	if param != "" {
		e = e.withParam(param)
	}
	return e
}

var (
	errNotFound         = newError(http.StatusNotFound, catInvalidRequest, "resource_not_found", "No such resource.")
	errMethodNotAllowed = newError(http.StatusMethodNotAllowed, catInvalidRequest, "method_not_allowed", "This method is not supported on this endpoint.")
	errAuthentication   = newError(http.StatusUnauthorized, catAuthentication, "authentication_required", "A valid API key is required.")
	errPayloadTooLarge  = newError(http.StatusRequestEntityTooLarge, catInvalidRequest, "payload_too_large", "The request body is too large.")
	errInternal         = newError(http.StatusInternalServerError, catAPI, "internal_error", "An unexpected error occurred; retrying may help.")
	errKeyRequired      = newError(http.StatusBadRequest, catInvalidRequest, "idempotency_key_required", "POST requests must carry an Idempotency-Key header.").withParam("Idempotency-Key")
	errKeyReused        = newError(http.StatusConflict, catIdempotency, "idempotency_key_already_used", "This Idempotency-Key was already used with different parameters.")
	errInProgress       = newError(http.StatusConflict, catIdempotency, "request_in_progress", "A request with this Idempotency-Key is being processed.")
	errHTTPSRequired    = newError(http.StatusForbidden, catInvalidRequest, "permission_denied", "Requests must use HTTPS.")
	// errIngestToken is the internal routes' 401: they take the engine's
	// ingest token, not an API key, and an operator reading "API key"
	// looks for the wrong thing.
	errIngestToken = newError(http.StatusUnauthorized, catAuthentication, "authentication_required",
		"The ingest token is required: send the engine's WEBHOOKD_INGEST_TOKEN as Authorization: Bearer <token>.")
	// errIngestTokenUnset is errIngestToken when the engine has none, so
	// that no token could ever be right.
	errIngestTokenUnset = newError(http.StatusUnauthorized, catAuthentication, "authentication_required",
		"The internal API is disabled: WEBHOOKD_INGEST_TOKEN is not set on this engine.")
	// errSessionEnded is the 401 of a portal session token that is
	// unknown, expired or revoked: the portal asks for a new link.
	errSessionEnded = newError(http.StatusUnauthorized, catAuthentication, "authentication_required",
		"The portal session is unknown, expired or ended; ask for a new portal link.")
	errUnreachable = errUpstream("A backing service (Postgres or Redis) could not be reached; retry after the Retry-After delay.")
)

// errUpstream is spec 7's upstream_error: a backing service could not be
// reached. It says when to retry, since the same request will succeed once
// the service is back.
func errUpstream(message string) *Error {
	e := newError(http.StatusInternalServerError, catAPI, "upstream_error", message)
	e.RetryAfter = 1
	return e
}

// unreachable tells whether err is a backing service that could not be
// reached or did not answer in time (a dial error, a timeout, a closed
// client, a Postgres connection cut by a restart of the server or its
// pooler), rather than one that answered with an error.
func unreachable(err error) bool {
	var netErr net.Error // context.DeadlineExceeded is one too
	return errors.As(err, &netErr) || errors.Is(err, redis.ErrClosed) || store.ConnectionLost(err)
}

func errInsufficientScope(scopes ...string) *Error {
	e := newError(http.StatusForbidden, catInvalidRequest, "insufficient_scope", "The API key lacks a required scope.")
	e.RequiredScopes = scopes
	return e
}

// errMissingCapability is insufficient_scope for a portal session: it
// names the capability the session lacks.
func errMissingCapability(capability string) *Error {
	e := newError(http.StatusForbidden, catInvalidRequest, "insufficient_scope",
		"The portal session lacks the "+capability+" capability.")
	e.RequiredScopes = []string{capability}
	return e
}

func errAPIVersion(message string) *Error {
	return newError(http.StatusBadRequest, catInvalidRequest, "api_version_error", message).withParam("api-version")
}

func errRateLimited(retryAfter int) *Error {
	e := newError(http.StatusTooManyRequests, catRateLimit, "rate_limit_exceeded", "Too many requests; retry after the Retry-After delay.")
	e.RetryAfter = retryAfter
	return e
}

// asError maps any error to the API error it stands for. It is the one
// place where domain errors meet the spec's codes; anything unknown is an
// internal error whose detail is logged, never sent.
func asError(ctx context.Context, logger *slog.Logger, err error) *Error {
	var apiErr *Error
	var ruleErr *invalid.Error
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &ruleErr):
		// A broken domain rule: the spec has one code for an absent field
		// and one for a wrong value.
		switch {
		case ruleErr.Missing:
			return errMissing(ruleErr.Param)
		case ruleErr.Rule == invalid.RuleTooLarge:
			tooLarge := *errPayloadTooLarge
			tooLarge.Message = ruleErr.Message
			return tooLarge.withParam(ruleErr.Param)
		case ruleErr.Rule == payloadschema.Rule:
			// The spec's code for a body that fails schema validation.
			return errValidation(ruleErr.Param, ruleErr.Message)
		}
		return errInvalid(ruleErr.Param, ruleErr.Message)
	case errors.Is(err, store.ErrNotFound):
		return errNotFound
	case errors.Is(err, store.ErrSubscriptionInactive):
		return errConflict("The webhook subscription is disabled or deleted; enable it before redelivering.")
	case errors.Is(err, store.ErrReplayRunning):
		return errConflict("A replay of this merchant is running; wait until it completes (GET /v1/replays/{id}) before starting another.")
	case errors.Is(err, store.ErrAPIKeyInactive):
		return errConflict("The API key is revoked, expired or already rolled; only a key in use can be rolled.")
	case errors.Is(err, store.ErrEventNotScheduled):
		return errConflict("The event was published for delivery at once, not with deliver_at: there is nothing scheduled to cancel.")
	case errors.Is(err, store.ErrEventStarted):
		return errConflict("The event's deliveries have already started; only deliveries still scheduled can be cancelled.")
	case errors.Is(err, store.ErrConflict):
		return errConflict("The resource changed concurrently; retry.")
	case unreachable(err):
		logger.WarnContext(ctx, "backing service unreachable", "correlation_id", correlationID(ctx), "error", err)
		return errUnreachable
	default:
		logger.ErrorContext(ctx, "internal error", "correlation_id", correlationID(ctx), "error", err)
		return errInternal
	}
}

// bankingError is the flat body of spec 7: every field always present.
type bankingError struct {
	Category       string   `json:"category"`
	Code           string   `json:"code"`
	Message        string   `json:"message"`
	Param          *string  `json:"param"`
	DocURL         string   `json:"doc_url"`
	CorrelationID  string   `json:"correlation_id"`
	RequiredScopes []string `json:"required_scopes,omitempty"`
}

// legacyError is the body of the legacy surface (spec 7, legacy 409).
type legacyError struct {
	Message  string `json:"message"`
	Category string `json:"category"`
	DocURL   string `json:"docUrl"`
}
