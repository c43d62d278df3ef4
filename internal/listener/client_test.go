package listener

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
)

// TestForwardCopiesTheDelivery checks that the local server gets exactly
// the delivery's body and headers, and that its answer, cut to 1 KiB, is
// what goes back.
func TestForwardCopiesTheDelivery(t *testing.T) {
	var got *http.Request
	var body []byte
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, body = r, must(io.ReadAll(r.Body))
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, strings.Repeat("x", 5000))
	}))
	defer local.Close()
	var out bytes.Buffer
	c := &Client{ForwardTo: local.URL + "/hook", Out: &out}
	d := Delivery{Type: TypeDelivery, ID: "d1", EventID: "e1", EventType: "payout.paid", Body: `{"a":1}`,
		Headers:  map[string]string{"webhook-id": "e1", "webhook-signature": "v1,abc", "content-type": "application/json"},
		Deadline: time.Now().Add(time.Minute)}
	a := c.forward(context.Background(), c.localClient(), d)
	if got == nil || got.URL.Path != "/hook" || string(body) != d.Body || got.Header.Get("webhook-signature") != "v1,abc" ||
		got.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("the local server got %v %q", got, body)
	}
	if a.Type != TypeAnswer || a.ID != "d1" || a.Status != http.StatusTeapot || len(a.Body) != MaxAnswerBody || a.Error != "" {
		t.Errorf("answer = %+v", a)
	}
	if line := out.String(); !strings.Contains(line, "payout.paid") || !strings.Contains(line, "e1") || !strings.Contains(line, "→ 418") {
		t.Errorf("line = %q, want the type, the event id and the local status", line)
	}
}

// TestForwardNamesLocalErrors checks the error codes of a local server
// that gives no answer.
func TestForwardNamesLocalErrors(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer slow.Close()
	tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsServer.Close()
	for _, tc := range []struct {
		name, url  string
		skipVerify bool
		deadline   time.Duration
		want       string
		status     int
	}{
		{"nothing listening", closed.URL, false, time.Minute, "connection_refused", 0},
		{"too slow", slow.URL, false, 200 * time.Millisecond, "timeout", 0},
		{"self-signed certificate", tlsServer.URL, false, time.Minute, "tls_error", 0},
		{"self-signed certificate, skip-verify", tlsServer.URL, true, time.Minute, "", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{ForwardTo: tc.url, SkipVerify: tc.skipVerify, Out: io.Discard}
			a := c.forward(context.Background(), c.localClient(), Delivery{ID: "d", Deadline: time.Now().Add(tc.deadline)})
			if a.Error != tc.want || a.Status != tc.status {
				t.Errorf("answer = %+v, want error %q status %d", a, tc.want, tc.status)
			}
		})
	}
}

// TestRunReconnectsToItsListener plays the engine: it drops the first
// connection after one delivery, and checks that the command reconnects
// naming its listener, and answers the next delivery on the new one.
func TestRunReconnectsToItsListener(t *testing.T) {
	listenerID := uuid.New()
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer local.Close()
	var mu sync.Mutex
	var resumes []string
	answers := make(chan Answer, 2)
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" || r.URL.Path != "/v1/listen" || r.URL.Query().Get("events") != "payout.paid" {
			http.Error(w, `{"code":"authentication_required","message":"no"}`, http.StatusUnauthorized)
			return
		}
		mu.Lock()
		resumes = append(resumes, r.URL.Query().Get("listener_id"))
		mu.Unlock()
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		ctx := r.Context()
		send := func(v any) { _ = conn.Write(ctx, websocket.MessageText, must(json.Marshal(v))) }
		send(Ready{Type: TypeReady, ListenerID: listenerID, Secret: "whsec_x", Events: []string{"payout.paid"}, GraceSeconds: 5})
		send(Delivery{Type: TypeDelivery, ID: uuid.NewString(), EventType: "payout.paid", Body: "{}", Deadline: time.Now().Add(time.Minute)})
		_, msg, err := conn.Read(ctx)
		if err != nil {
			return
		}
		var a Answer
		_ = json.Unmarshal(msg, &a)
		answers <- a
	}))
	defer engine.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &Client{API: engine.URL, APIKey: "k", ForwardTo: local.URL, Events: []string{"payout.paid"}, Out: io.Discard, Log: io.Discard}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for range 2 {
		select {
		case a := <-answers:
			if a.Status != http.StatusNoContent {
				t.Errorf("answer = %+v, want the local 204", a)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no answer")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil once cancelled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(resumes) < 2 || resumes[0] != "" || resumes[1] != listenerID.String() {
		t.Errorf("connections named listeners %q, want none then %s", resumes, listenerID)
	}
}

// TestRunReportsRefusal checks that a refused handshake ends Run with the
// engine's error, naming a missing scope.
func TestRunReportsRefusal(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"code":"insufficient_scope","message":"The API key lacks a required scope.","required_scopes":["webhooks:write"]}`)
	}))
	defer engine.Close()
	c := &Client{API: engine.URL, APIKey: "k", ForwardTo: "http://127.0.0.1:9", Out: io.Discard, Log: io.Discard}
	err := c.Run(context.Background())
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden || !strings.Contains(err.Error(), "webhooks:write") {
		t.Fatalf("Run = %v, want the refusal naming webhooks:write", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
