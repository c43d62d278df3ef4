package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// erasureReceiver fails every request carrying the subject's payload,
// echoing it in its answer (so that the attempt records a response body
// holding it), and the first two requests of the sentinel event; it counts
// what arrives.
type erasureReceiver struct {
	*httptest.Server
	mu                  sync.Mutex
	subject, sentinel   string
	subjectN, sentinelN int
}

func newErasureReceiver(t *testing.T, subject, sentinel string) *erasureReceiver {
	r := &erasureReceiver{subject: subject, sentinel: sentinel}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case strings.Contains(string(body), r.subject):
			r.subjectN++
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write(body)
		case strings.Contains(string(body), r.sentinel):
			r.sentinelN++
			if r.sentinelN <= 2 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *erasureReceiver) counts() (subject, sentinel int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.subjectN, r.sentinelN
}

// TestErasureEndToEnd: an event whose delivery failed against a real
// receiver (its attempt recorded the payload in the response body) and
// whose poll delivery still waits is erased through the internal API; then
// the merchant API, poll and every column of the database show the
// tombstone and never the payload, both deliveries are erased, and no
// further attempt of it is made: a sentinel event on the same
// subscription, published after the erasure, fails twice and is retried on
// the same schedule, and its last retry (due after the erased delivery's
// would have been) arrives while the erased one's does not.
func TestErasureEndToEnd(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	e := newEngineOn(t, dbURL, "WEBHOOKD_RETRY_SCHEDULE=2s,2s")
	e.start()
	key := e.keysCreate("m_erase")
	subject, sentinel := "subject-"+uuid.NewString(), "sentinel-"+uuid.NewString()
	rc := newErasureReceiver(t, subject, sentinel)
	api := "http://" + e.public
	if status, sub := e.call("POST", api+"/v1/webhook_subscriptions", key,
		map[string]any{"url": rc.URL + "/hook", "events": []string{"*"}}); status != 201 {
		t.Fatalf("subscribe: %d %v", status, sub)
	}
	status, poll := e.call("POST", api+"/v1/webhook_subscriptions", key,
		map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "poll"}})
	if status != 201 {
		t.Fatalf("poll subscription: %d %v", status, poll)
	}
	publish := func(note string) string {
		status, ev := e.call("POST", "http://"+e.internal+"/internal/v1/events", e2eToken,
			map[string]any{"merchant_id": "m_erase", "type": "payout.paid", "payload": map[string]any{"id": "po_1", "note": note}})
		if status != 202 {
			t.Fatalf("publish: %d %v", status, ev)
		}
		return ev["id"].(string)
	}
	get := func(path string) string {
		req, _ := http.NewRequest(http.MethodGet, api+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}

	id := publish(subject)
	waitFor(t, "the first attempt of the subject's delivery", 10*time.Second, func() bool {
		n, _ := rc.counts()
		return n >= 1 && strings.Contains(get("/v1/webhook_deliveries?event_id="+id), `"attempt_count":1`)
	})
	status, erased := e.call("POST", "http://"+e.internal+"/internal/v1/events/"+id+"/erase", e2eToken, map[string]any{"merchant_id": "m_erase"})
	if status != 200 || erased["deliveries"] != 2.0 || erased["deliveries_ended"] != 2.0 || erased["attempts"] != 1.0 {
		t.Fatalf("erase: %d %v", status, erased)
	}

	sentinelID := publish(sentinel)
	// The sentinel's third attempt is due at least 3.6 s (two delays of
	// 2 s, jittered by 10 %) after it was published, itself after the
	// erasure: later than the erased delivery's retry (2.2 s at most
	// after its first attempt) would have been.
	waitFor(t, "the sentinel's last attempt", 15*time.Second, func() bool {
		_, n := rc.counts()
		return n >= 3
	})
	if n, _ := rc.counts(); n != 1 {
		t.Fatalf("the erased event was sent %d times, want once (before the erasure)", n)
	}

	reads := map[string]string{
		"event":      get("/v1/events/" + id),
		"deliveries": get("/v1/webhook_deliveries?event_id=" + id),
		"events":     get("/v1/events"),
		"poll":       get("/v1/webhook_subscriptions/" + poll["id"].(string) + "/poll"),
	}
	for name, body := range reads {
		if strings.Contains(body, subject) {
			t.Errorf("%s shows the erased payload: %s", name, body)
		}
	}
	if !strings.Contains(reads["event"], `"erased":true`) || !strings.Contains(reads["poll"], `erased`) ||
		strings.Count(reads["deliveries"], `"status":"erased"`) != 2 {
		t.Errorf("reads do not show the erasure: %v", reads)
	}
	if !strings.Contains(get("/v1/webhook_deliveries?event_id="+sentinelID), `"status":"succeeded"`) {
		t.Errorf("the sentinel did not succeed")
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if where := storetest.ColumnsHolding(t, pool, subject); len(where) > 0 {
		t.Fatalf("the database still holds the erased payload in %v", where)
	}
}
