package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// idempotencyStore keeps each merchant's Idempotency-Keys and the answers
// they stored.
type idempotencyStore interface {
	ClaimIdempotencyKey(ctx context.Context, merchantID, key string, requestHash []byte, lockFor time.Duration) (store.IdempotencyOutcome, store.StoredResponse, error)
	CompleteIdempotencyKey(ctx context.Context, merchantID, key string, resp store.StoredResponse) error
	ReleaseIdempotencyKey(ctx context.Context, merchantID, key string) error
}

// idempotency is the middleware of spec 4.4: a POST repeated with its
// Idempotency-Key is answered what the first one was. It is its own type
// because it alone writes requests' answers to the database, sealed with
// the master key.
type idempotency struct {
	respond   responder
	store     idempotencyStore
	masterKey []byte
}

// idempotencyLock is how long a claimed key blocks concurrent requests if
// its holder dies before answering.
const idempotencyLock = time.Minute

// maxIdempotencyKey is spec 8's limit, in characters.
const maxIdempotencyKey = 255

// checkIdempotencyKey refuses a key that a text column cannot hold (not
// UTF-8, which a header may well be, or holding a NUL, which net/http
// refuses before any handler but another server might not) or longer than
// spec 8's 255 characters: runes, not bytes, so that 255 é is a valid key.
func checkIdempotencyKey(key string) error {
	if !utf8.ValidString(key) || strings.ContainsRune(key, 0) {
		return errInvalid("Idempotency-Key", "Idempotency-Key must be UTF-8 text without NUL.")
	}
	if utf8.RuneCountInString(key) > maxIdempotencyKey {
		return errInvalid("Idempotency-Key", fmt.Sprintf("Idempotency-Key must be at most %d characters.", maxIdempotencyKey))
	}
	return nil
}

// idempotent applies spec 4.4 to POST requests: required on the Banking
// surface, optional on the legacy one. Only 2xx answers are stored.
func (i idempotency) idempotent(required bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				next.ServeHTTP(w, r)
				return
			}
			key := r.Header.Get("Idempotency-Key")
			if key == "" {
				if required {
					i.respond.writeError(w, r, errKeyRequired)
					return
				}
				next.ServeHTTP(w, r)
				return
			}
			if err := checkIdempotencyKey(key); err != nil {
				i.respond.writeError(w, r, err)
				return
			}
			merchant := principalOf(r.Context()).Merchant.ID
			h := sha256.New()
			h.Write([]byte(r.Method + " " + r.URL.Path + "\n"))
			h.Write(requestBody(r))
			outcome, stored, err := i.store.ClaimIdempotencyKey(r.Context(), merchant, key, h.Sum(nil), idempotencyLock)
			if err != nil {
				i.respond.writeError(w, r, err)
				return
			}
			switch outcome {
			case store.IdempotencyMismatch:
				i.respond.writeError(w, r, errKeyReused)
				return
			case store.IdempotencyInProgress:
				i.respond.writeError(w, r, errInProgress)
				return
			case store.IdempotencyReplay:
				body, err := i.openCachedAnswer(stored.Body)
				if err != nil {
					i.respond.writeError(w, r, err)
					return
				}
				for k, v := range stored.Header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Idempotent-Replayed", "true")
				w.WriteHeader(stored.Status)
				_, _ = w.Write(body)
				return
			}
			rec := &recorder{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(rec, r)
			// The key must be settled even if the client went away.
			ctx := context.WithoutCancel(r.Context())
			if rec.status >= 200 && rec.status < 300 {
				var sealed []byte
				if sealed, err = i.sealCachedAnswer(rec.body.Bytes()); err == nil {
					err = i.store.CompleteIdempotencyKey(ctx, merchant, key, store.StoredResponse{
						Status: rec.status, Header: map[string]string{"Content-Type": w.Header().Get("Content-Type")}, Body: sealed,
					})
				}
			} else {
				err = i.store.ReleaseIdempotencyKey(ctx, merchant, key)
			}
			if err != nil {
				i.respond.logger.ErrorContext(ctx, "settle idempotency key", "correlation_id", correlationID(ctx), "error", err)
			}
		})
	}
}

// sealCachedAnswer encrypts an answer before it is cached for 30 days:
// the answers of create and rotate_secret carry a signing secret, which
// must not sit in the database in clear (secrets are sealed at rest).
func (i idempotency) sealCachedAnswer(body []byte) ([]byte, error) {
	sealer, err := signer.NewSealer(i.masterKey)
	if err != nil {
		return nil, fmt.Errorf("seal cached answer: %w", err)
	}
	return sealer.Seal(string(body))
}

// openCachedAnswer decrypts what sealCachedAnswer stored.
func (i idempotency) openCachedAnswer(sealed []byte) ([]byte, error) {
	sealer, err := signer.NewSealer(i.masterKey)
	if err != nil {
		return nil, fmt.Errorf("open cached answer: %w", err)
	}
	body, err := sealer.Open(sealed)
	if err != nil {
		return nil, fmt.Errorf("open cached answer: %w", err)
	}
	return []byte(body), nil
}

// recorder keeps a copy of the answer for the idempotency store.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

// WriteHeader notes the status.
func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Write keeps a copy of what it writes.
func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}
