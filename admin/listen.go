package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store"
)

// listenRoutes is GET /v1/listen, the WebSocket of `webhookd listen`. It
// takes an API key with webhooks:write, never a portal session: the
// listener's signing secret is derived from the key.
func (s *Server) listenRoutes(r chi.Router) {
	r.With(s.requireScope(ScopeWrite)).Get("/listen", s.handle(s.listen))
}

// errUpgradeRequired answers a GET /v1/listen that is no WebSocket
// handshake.
var errUpgradeRequired = errInvalid("Upgrade", "GET /v1/listen opens a WebSocket (Upgrade: websocket); use `webhookd listen`.")

// listen opens (or, with listener_id, resumes) a listener of the merchant
// and relays its deliveries down the WebSocket until the connection ends.
// Everything that can be refused is refused before the upgrade, as an
// ordinary API error the command can print.
func (s *Server) listen(w http.ResponseWriter, r *http.Request) error {
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
	secretOnly := false
	if v := q.Get("secret_only"); v != "" {
		if v != "true" && v != "false" {
			return errInvalid("secret_only", "secret_only must be true or false.")
		}
		secretOnly = v == "true"
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return errUpgradeRequired
	}
	if secretOnly {
		return s.sendListenerSecret(w, r)
	}

	now := s.cfg.Now()
	var l store.Listener
	secret, err := s.subscriptions.ListenerSecret(p.Key.ID)
	if err != nil {
		return err
	}
	if resumeID != uuid.Nil {
		// A listener that ended, another merchant's, or one another key
		// opened (it ends with that key) is not resumed: a new one is
		// opened, and the ready message names it.
		l, err = s.store.GetListener(ctx, p.Merchant.ID, resumeID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if l.APIKeyID != p.Key.ID {
			l = store.Listener{}
		}
	}
	if l.ID == uuid.Nil {
		l, secret, err = s.subscriptions.OpenListener(ctx, p.Merchant.ID, p.Key.ID, events, now.Add(s.cfg.ListenerGrace))
		if err != nil {
			return err
		}
		// Tied to the key, so that it ends when the key does. A key
		// revoked since this request was authenticated ends the listener
		// at once, and the request is refused as the key now is.
		err = s.store.BindListener(ctx, p.Merchant.ID, l.ID, p.Key.ID)
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
		s.logger.InfoContext(ctx, "listener handshake failed", "listener_id", l.ID, "error", err)
		return nil
	}
	s.logger.InfoContext(ctx, "listener connected", "listener_id", l.ID, "merchant_id", p.Merchant.ID, "resumed", l.ID == resumeID)
	session := &listenerConn{conn: conn, redis: s.cfg.Redis, store: s.store, listener: l, secret: secret,
		grace: s.cfg.ListenerGrace, now: s.cfg.Now, logger: s.logger}
	session.run(ctx)
	s.logger.InfoContext(ctx, "listener disconnected", "listener_id", l.ID, "merchant_id", p.Merchant.ID)
	return nil
}

// sendListenerSecret answers secret_only=true (`webhookd listen
// --print-secret`): the ready message with the key's listener secret and
// no listener, then a normal close. No listener is opened, so nothing is
// delivered to it.
func (s *Server) sendListenerSecret(w http.ResponseWriter, r *http.Request) error {
	secret, err := s.subscriptions.ListenerSecret(principalOf(r.Context()).Key.ID)
	if err != nil {
		return err
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil // Accept has answered
	}
	msg, err := json.Marshal(listener.Ready{Type: listener.TypeReady, Secret: secret, Events: []string{},
		GraceSeconds: int(s.cfg.ListenerGrace / time.Second)})
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
