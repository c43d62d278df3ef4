package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// listenStore is what opening a listener's WebSocket reads and writes
// besides what the connection then needs.
type listenStore interface {
	listenerStore
	// GetListener is store.ErrNotFound for a stranger's or a missing
	// listener.
	GetListener(ctx context.Context, merchantID string, id uuid.UUID) (store.Listener, error)
	// BindListener ties the listener to the API key that opened it;
	// store.ErrNotFound once the key no longer works.
	BindListener(ctx context.Context, merchantID string, id, keyID uuid.UUID) error
}

// listenHandlers serve GET /v1/listen, the WebSocket of `webhookd listen`:
// a listener receives the merchant's deliveries on the developer's
// machine. They are separate because they alone hold a connection open,
// relaying deliveries through Redis (listenerConn), for as long as the
// command runs.
type listenHandlers struct {
	// registry opens listeners and derives their signing secret from the
	// API key.
	registry *subscriptions.Registry
	store    listenStore
	redis    redis.UniversalClient
	// wakes is the process's shared pub/sub connection, on which every
	// connection waits for its listener's deliveries.
	wakes *queue.WakeHub
	// grace is how long a listener outlives its connection, for the
	// command to reconnect.
	grace  time.Duration
	clock  clock.Clock
	logger *slog.Logger
	// held bounds each merchant's connections open at once.
	held *heldLimit
}

// listenRetryAfter is the Retry-After, in seconds, of a listen refused
// because its merchant holds as many connections as it may: they end
// when a developer stops the command, which is not soon.
const listenRetryAfter = 10

// errUpgradeRequired answers a GET /v1/listen that is no WebSocket
// handshake.
var errUpgradeRequired = errInvalid("Upgrade", "GET /v1/listen opens a WebSocket (Upgrade: websocket); use `webhookd listen`.")

// listen opens (or, with listener_id, resumes) a listener of the merchant
// and relays its deliveries down the WebSocket until the connection ends.
// Everything that can be refused is refused before the upgrade, as an
// ordinary API error the command can print.
func (h listenHandlers) listen(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p := principalOf(ctx)
	q := r.URL.Query()
	var events []string
	if v := q.Get("events"); v != "" {
		events = strings.Split(v, ",")
	}
	var resumeID uuid.UUID
	if v := q.Get("listener_id"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			return errInvalid("listener_id", "listener_id must be the UUID of a listener.")
		}
		resumeID = id
	}
	secretOnly, err := boolQuery(r, "secret_only")
	if err != nil {
		return err
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return errUpgradeRequired
	}
	if secretOnly {
		return h.sendListenerSecret(w, r)
	}
	// Taken before anything is opened, and held as long as the
	// connection: its goroutines, its wait and its heartbeats.
	place, err := h.held.hold(ctx, p.Merchant.ID)
	if err != nil {
		return err
	}
	defer place.release()

	now := h.clock.Now()
	var l store.Listener
	secret, err := h.registry.ListenerSecret(p.Key.ID)
	if err != nil {
		return err
	}
	if resumeID != uuid.Nil {
		// A listener that ended, another merchant's, or one another key
		// opened (it ends with that key) is not resumed: a new one is
		// opened, and the ready message names it.
		l, err = h.store.GetListener(ctx, p.Merchant.ID, resumeID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if l.APIKeyID != p.Key.ID {
			l = store.Listener{}
		}
	}
	if l.ID == uuid.Nil {
		l, secret, err = h.registry.OpenListener(ctx, p.Merchant.ID, p.Key.ID, events, now.Add(h.grace))
		if err != nil {
			return err
		}
		// Tied to the key, so that it ends when the key does. A key
		// revoked since this request was authenticated ends the listener
		// at once, and the request is refused as the key now is.
		err = h.store.BindListener(ctx, p.Merchant.ID, l.ID, p.Key.ID)
		if errors.Is(err, store.ErrNotFound) {
			return errAuthentication
		}
		if err != nil {
			return err
		}
		l.APIKeyID = p.Key.ID
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		// Accept has answered the client; the listener ends after the
		// grace like any listener whose connection went away.
		h.logger.InfoContext(ctx, "listener handshake failed", "listener_id", l.ID, "error", err)
		return nil
	}
	h.logger.InfoContext(ctx, "listener connected", "listener_id", l.ID, "merchant_id", p.Merchant.ID, "resumed", l.ID == resumeID)
	session := &listenerConn{conn: conn, redis: h.redis, wakes: h.wakes, store: h.store, listener: l, secret: secret,
		grace: h.grace, now: h.clock.Now, logger: h.logger, place: place}
	session.run(ctx)
	h.logger.InfoContext(ctx, "listener disconnected", "listener_id", l.ID, "merchant_id", p.Merchant.ID)
	return nil
}

// sendListenerSecret answers secret_only=true (`webhookd listen
// --print-secret`): the ready message with the key's listener secret and
// no listener, then a normal close. No listener is opened, so nothing is
// delivered to it.
func (h listenHandlers) sendListenerSecret(w http.ResponseWriter, r *http.Request) error {
	secret, err := h.registry.ListenerSecret(principalOf(r.Context()).Key.ID)
	if err != nil {
		return err
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil // Accept has answered
	}
	msg, err := json.Marshal(listener.Ready{Type: listener.TypeReady, Secret: secret, Events: []string{},
		GraceSeconds: int(h.grace / time.Second)})
	if err == nil {
		err = conn.Write(r.Context(), websocket.MessageText, msg)
	}
	if err != nil {
		conn.CloseNow()
		return nil
	}
	_ = conn.Close(websocket.StatusNormalClosure, "secret sent")
	return nil
}
