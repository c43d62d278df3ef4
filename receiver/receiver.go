package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
)

// DefaultMaxBodyBytes bounds the body a [Receiver] reads when
// [Config.MaxBodyBytes] is zero: webhookd's largest payload (256 KiB by
// default) with ample room for the envelope.
const DefaultMaxBodyBytes = 1 << 20

// Handler processes one verified event. Returning nil acknowledges the
// delivery (2xx); returning an error makes webhookd retry it later, on its
// schedule, with the same event id.
type Handler interface {
	HandleEvent(ctx context.Context, ev *Event) error
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(ctx context.Context, ev *Event) error

// HandleEvent calls f.
func (f HandlerFunc) HandleEvent(ctx context.Context, ev *Event) error { return f(ctx, ev) }

// Config configures a [Receiver].
type Config struct {
	// Verifier checks every delivery's signature and timestamp; required.
	Verifier *Verifier
	// Handler processes each verified event that is not a duplicate;
	// required.
	Handler Handler
	// Decrypter, when set, decrypts each body after its signature is
	// verified and before it is decoded: for a subscription with
	// encryption, whose bodies are JWEs (package receiver/jwe). The
	// signature covers the body as sent, so verification comes first. nil
	// decodes bodies as they arrive.
	Decrypter Decrypter
	// Dedup suppresses repeated deliveries of one event id; nil runs the
	// handler for every verified delivery, duplicates included.
	Dedup Deduplicator
	// MaxBodyBytes bounds the body read; zero means DefaultMaxBodyBytes.
	// A larger body is refused with 413 before it is verified.
	MaxBodyBytes int64
	// Logger gets one line per refused delivery and per failed handler;
	// nil means slog.Default().
	Logger *slog.Logger
}

// validate checks the config without changing it.
func (c Config) validate() error {
	switch {
	case c.Verifier == nil:
		return errors.New("receiver: Config.Verifier is required")
	case c.Handler == nil:
		return errors.New("receiver: Config.Handler is required")
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("receiver: negative MaxBodyBytes %d", c.MaxBodyBytes)
	}
	return nil
}

// Receiver is the [http.Handler] of a webhook endpoint. For each POST it
// reads the raw body (bounded), verifies it, decodes the [Event], claims the
// event id, runs the handler and answers so that webhookd does the right
// thing next:
//
//	401  bad or missing signature headers, stale or future timestamp
//	     (plain-text body says why); webhookd retries, and the delivery
//	     fails in the end: check the secret and the clock
//	400  signed body that is not an event envelope, or that the
//	     Decrypter cannot decrypt
//	405  a method other than POST
//	413  body above MaxBodyBytes
//	200  handled now ("ok"), or handled before ("duplicate"): the handler
//	     is not called again
//	409  another delivery of the same event is being handled right now;
//	     webhookd retries later and then gets 200 or, if that handler
//	     failed, a fresh attempt
//	500  the handler returned an error (or panicked): webhookd retries
//	503  the duplicate store failed: webhookd retries
type Receiver struct {
	cfg Config
}

// New returns a Receiver for cfg.
func New(cfg Config) (*Receiver, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Receiver{cfg: cfg}, nil
}

// ServeHTTP implements [http.Handler].
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		answer(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rc.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			rc.refuse(r, w, http.StatusRequestEntityTooLarge, "body larger than "+strconv.FormatInt(rc.cfg.MaxBodyBytes, 10)+" bytes", err)
			return
		}
		rc.refuse(r, w, http.StatusBadRequest, "could not read body", err)
		return
	}
	id, ts := headerValue(r.Header, HeaderID), headerValue(r.Header, HeaderTimestamp)
	if err := rc.cfg.Verifier.VerifyValues(id, ts, headerValue(r.Header, HeaderSignature), body); err != nil {
		rc.refuse(r, w, http.StatusUnauthorized, verifyReason(err), err)
		return
	}
	if rc.cfg.Decrypter != nil {
		if body, err = rc.cfg.Decrypter.Decrypt(body); err != nil {
			rc.refuse(r, w, http.StatusBadRequest, "body could not be decrypted", err)
			return
		}
	}
	if batch := headerValue(r.Header, HeaderBatchSize); batch != "" {
		rc.serveBatch(w, r, batch, body, ts)
		return
	}
	ev, err := ParseEvent(body)
	if err == nil && ev.ID != id {
		err = fmt.Errorf("%w: envelope id %q is not the webhook-id header %q", ErrMalformedEvent, ev.ID, id)
	}
	if err != nil {
		rc.refuse(r, w, http.StatusBadRequest, "body is not a webhook event envelope", err)
		return
	}
	ev.Attempted, _ = ParseTimestamp(ts) // verified above
	status, text := rc.handle(r.Context(), ev)
	answer(w, status, text)
}

// handle runs the handler under a claim on the event id and returns the
// answer it calls for.
func (rc *Receiver) handle(ctx context.Context, ev *Event) (status int, text string) {
	logger := rc.cfg.Logger.With("webhook_id", ev.ID, "event_type", ev.Type)
	if rc.cfg.Dedup == nil {
		if err := rc.cfg.Handler.HandleEvent(ctx, ev); err != nil {
			logger.ErrorContext(ctx, "webhook handler failed", "error", err)
			return http.StatusInternalServerError, "handler failed"
		}
		return http.StatusOK, "ok"
	}

	claim, err := rc.cfg.Dedup.Claim(ctx, ev.ID)
	if err != nil {
		logger.ErrorContext(ctx, "webhook duplicate check failed", "error", err)
		return http.StatusServiceUnavailable, "duplicate check failed"
	}
	switch claim.State {
	case Done:
		return http.StatusOK, "duplicate"
	case InProgress:
		return http.StatusConflict, "this event is being handled by another delivery"
	case Claimed:
	default:
		logger.ErrorContext(ctx, "webhook duplicate check returned an unknown state", "state", int(claim.State))
		return http.StatusServiceUnavailable, "duplicate check failed"
	}

	// Release the claim if the handler panics, so that webhookd's retry
	// runs it again at once rather than after the lease.
	returned := false
	defer func() {
		if !returned {
			rc.release(context.WithoutCancel(ctx), logger, claim)
		}
	}()
	err = rc.cfg.Handler.HandleEvent(ctx, ev)
	returned = true
	if err != nil {
		rc.release(context.WithoutCancel(ctx), logger, claim)
		logger.ErrorContext(ctx, "webhook handler failed", "error", err)
		return http.StatusInternalServerError, "handler failed"
	}
	// The request's context may be cancelled by now (webhookd gave up
	// waiting): the work is done, so record it anyway.
	if err := rc.cfg.Dedup.Complete(context.WithoutCancel(ctx), claim); err != nil {
		// The handler's work stands; a later duplicate will run it again
		// once the lease ends. Still 2xx: a retry would do the same.
		logger.ErrorContext(ctx, "webhook duplicate store failed to record a handled event", "error", err)
	}
	return http.StatusOK, "ok"
}

// release frees the claim after a failed handler, logging a failure: the
// claim then ends with its lease instead.
func (rc *Receiver) release(ctx context.Context, logger *slog.Logger, c Claim) {
	if err := rc.cfg.Dedup.Release(ctx, c); err != nil {
		logger.ErrorContext(ctx, "webhook duplicate store failed to release a claim", "error", err)
	}
}

// refuse logs why a delivery was refused and answers status with reason.
func (rc *Receiver) refuse(r *http.Request, w http.ResponseWriter, status int, reason string, err error) {
	rc.cfg.Logger.WarnContext(r.Context(), "webhook delivery refused", "status", status,
		"webhook_id", headerValue(r.Header, HeaderID), "error", err)
	answer(w, status, reason)
}

// answer writes a short plain-text answer. webhookd keeps the start of it
// with the attempt, where the merchant can read it.
func answer(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text+"\n")
}

// verifyReason is the plain-text reason of a verification failure: enough
// for the merchant to fix the cause, nothing an attacker could use.
func verifyReason(err error) string {
	var missing *MissingHeaderError
	switch {
	case errors.As(err, &missing):
		return "missing header " + missing.Header
	case errors.Is(err, ErrInvalidTimestamp):
		return "webhook-timestamp is not Unix seconds"
	case errors.Is(err, ErrTimestampTooOld):
		return "webhook-timestamp too old"
	case errors.Is(err, ErrTimestampTooNew):
		return "webhook-timestamp too far in the future"
	case errors.Is(err, ErrNoMatchingSignature):
		return "no matching signature"
	}
	return "verification failed"
}
