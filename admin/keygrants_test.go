package admin_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/listener"
)

// What an API key opened ends with it: the portal sessions it minted and
// the listeners it opened, when it is revoked or rolled with no overlap.

// mintWithKey mints a portal session with an API key.
func (h *harness) mintWithKey(key string) mintedSession {
	h.t.Helper()
	r := h.do(request{Method: http.MethodPost, Path: "/v1/portal_sessions", Key: key, Body: map[string]any{}})
	if r.Status != http.StatusCreated {
		h.t.Fatalf("mint with a key: %d %s", r.Status, r.Body)
	}
	return decode[mintedSession](h.t, r)
}

// TestEndingAKeyEndsItsPortalSessions: once a key is revoked, or rolled
// with no overlap, every route refuses the sessions it minted with 401
// authentication_required; other keys' sessions and the core API's are
// untouched.
func TestEndingAKeyEndsItsPortalSessions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct {
		name string
		end  func(merchant string, keyID uuid.UUID) response
	}{
		{"revoked", func(m string, id uuid.UUID) response {
			return h.doInternal(request{Method: http.MethodDelete, Path: "/internal/v1/merchants/" + m + "/api_keys/" + id.String()})
		}},
		{"rolled with no overlap", func(m string, id uuid.UUID) response {
			return h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/merchants/" + m + "/api_keys/" + id.String() + "/roll",
				Body: map[string]any{"overlap_seconds": 0}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := "m_" + uuid.NewString()[:8]
			doomed, sibling := h.issuedKey(m), h.issuedKey(m)
			session, siblingSession, core := h.mintWithKey(doomed.Key), h.mintWithKey(sibling.Key), h.session(m, nil)
			created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: session.Token,
				Body: map[string]any{"url": "https://example.com/hook", "events": []string{"*"}}})
			if created.Status != http.StatusCreated {
				t.Fatalf("create with the session: %d %s", created.Status, created.Body)
			}
			sub := created.JSON(t)["id"].(string)

			if r := tc.end(m, doomed.ID); r.Status/100 != 2 {
				t.Fatalf("end the key: %d %s", r.Status, r.Body)
			}
			for _, req := range []request{
				{Method: http.MethodGet, Path: "/v1/webhook_subscriptions"},
				{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub + "/secret"},
				{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Body: map[string]any{"url": "https://example.com/h2", "events": []string{"*"}}},
				{Method: http.MethodGet, Path: "/v1/portal_sessions/current"},
			} {
				req.Key = session.Token
				expectError(t, h.do(req), http.StatusUnauthorized, "authentication_required")
			}
			for name, token := range map[string]string{"another key's": siblingSession.Token, "the core API's": core.Token} {
				if r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: token}); r.Status != http.StatusOK {
					t.Errorf("%s session after the key ended: %d %s", name, r.Status, r.Body)
				}
			}
		})
	}
}

// closedWithin reads conn until it fails, and says how long that took.
func closedWithin(t *testing.T, conn *websocket.Conn, within time.Duration) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	start := time.Now()
	for {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("the connection is still open after %s", within)
			}
			return time.Since(start), err
		}
		t.Errorf("a %v message came down the connection of an ended key: %s", typ, msg)
	}
}

// TestRevokingAKeyClosesItsListeners: revoking a key closes its listeners'
// connections at once (not at their next heartbeat, 10 s here) and ends
// the listeners; another key's listener goes on and still gets deliveries.
func TestRevokingAKeyClosesItsListeners(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	doomed, sibling := h.issuedKey("m_lk"), h.issuedKey("m_lk")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, firstReady := h.dialListen(ctx, doomed.Key, "")
	second, secondReady := h.dialListen(ctx, doomed.Key, "?events=payout.paid")
	other, otherReady := h.dialListen(ctx, sibling.Key, "")

	revoked := time.Now()
	if r := h.doInternal(request{Method: http.MethodDelete, Path: "/internal/v1/merchants/m_lk/api_keys/" + doomed.ID.String()}); r.Status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	for _, conn := range []*websocket.Conn{first, second} {
		_, err := closedWithin(t, conn, 5*time.Second)
		if status := websocket.CloseStatus(err); status != websocket.StatusPolicyViolation {
			t.Errorf("closed with %v (%v), want a policy violation", status, err)
		}
	}
	t.Logf("both connections closed %s after the revocation was asked", time.Since(revoked))
	for _, id := range []uuid.UUID{firstReady.ListenerID, secondReady.ListenerID} {
		if _, ended, err := h.store.Listeners.ListenerExpiry(ctx, id); err != nil || !ended {
			t.Errorf("listener %s ended = %v, %v; want ended by the revocation", id, ended, err)
		}
	}
	// The revoked key cannot resume them, nor open another.
	if _, resp, err := websocket.Dial(ctx, h.public.URL+"/v1/listen?listener_id="+firstReady.ListenerID.String(),
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + doomed.Key}}}); err == nil ||
		resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("resume with the revoked key: %v, want 401", err)
	}

	d := listener.Delivery{Type: listener.TypeDelivery, ID: uuid.NewString(), EventID: uuid.NewString(), EventType: "payout.paid",
		Body: `{}`, Deadline: time.Now().Add(time.Minute)}
	h.relay(ctx, otherReady.ListenerID, d)
	var got listener.Delivery
	readJSON(ctx, t, other, &got)
	if got.ID != d.ID {
		t.Errorf("the other key's listener got %+v, want %s", got, d.ID)
	}
}

// TestNoDeliveryAfterTheKeyEnds: a delivery already in a listener's relay
// list is not written once the key is revoked, even before anything tells
// the connection (the key revoked in the store alone, as by a process
// that died before ending what it opened); the connection closes instead.
func TestNoDeliveryAfterTheKeyEnds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.issuedKey("m_nd")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, ready := h.dialListen(ctx, key.Key, "")
	if _, err := h.store.APIKeys.RevokeAPIKey(ctx, "m_nd", key.ID); err != nil {
		t.Fatal(err)
	}
	h.relay(ctx, ready.ListenerID, listener.Delivery{Type: listener.TypeDelivery, ID: uuid.NewString(), EventID: uuid.NewString(),
		EventType: "payout.paid", Body: `{"secret":"payload"}`, Deadline: time.Now().Add(time.Minute)})
	if _, err := closedWithin(t, conn, 5*time.Second); errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}

// TestListenerResumedOnlyByItsKey: another key of the same merchant does
// not resume a listener (it would not end with its key): it gets its own.
func TestListenerResumedOnlyByItsKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	first, second := h.issuedKey("m_rk"), h.issuedKey("m_rk")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, ready := h.dialListen(ctx, first.Key, "")
	conn.CloseNow()
	if _, again := h.dialListen(ctx, second.Key, "?listener_id="+ready.ListenerID.String()); again.ListenerID == ready.ListenerID {
		t.Errorf("another key resumed listener %s", ready.ListenerID)
	}
	if _, again := h.dialListen(ctx, first.Key, "?listener_id="+ready.ListenerID.String()); again.ListenerID != ready.ListenerID {
		t.Errorf("its own key got listener %s, want %s resumed", again.ListenerID, ready.ListenerID)
	}
}
