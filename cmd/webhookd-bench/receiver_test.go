package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/signer"
)

func mustSecret(t *testing.T) (string, signer.Key) {
	t.Helper()
	s, err := signer.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	k, err := signer.ParseSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}

// post sends one delivery signed with keys (none: no signature headers).
func post(t *testing.T, client *http.Client, url, id string, ts time.Time, body []byte, keys ...signer.Key) (int, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		signer.SetHeaders(req.Header, id, ts, body, keys...)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// receiverStep is one delivery posted to the receivers, and what they must
// answer and count after it.
type receiverStep struct {
	name       string
	url, id    string
	ts         time.Time
	keys       []signer.Key
	wantStatus int
	want       endpointCounts
}

// postSteps posts each step's delivery in turn and checks the answer and
// the receivers' totals after it.
func postSteps(t *testing.T, rcv *receivers, body []byte, steps []receiverStep) {
	t.Helper()
	for _, s := range steps {
		status, err := post(t, http.DefaultClient, s.url, s.id, s.ts, body, s.keys...)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if status != s.wantStatus {
			t.Errorf("%s: status %d, want %d", s.name, status, s.wantStatus)
		}
		if got := rcv.counts(); got != s.want {
			t.Errorf("%s: counts %+v, want %+v", s.name, got, s.want)
		}
	}
}

func TestReceiverVerifiesDeduplicatesAndTimestamps(t *testing.T) {
	log := newPublishLog(8)
	rcv, err := startReceivers(2, 0, 2, log)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.close()
	secret, key := mustSecret(t)
	_, otherKey := mustSecret(t)
	if err := rcv.setSecret(0, secret); err != nil {
		t.Fatal(err)
	}
	known, unknown := uuid.NewString(), uuid.NewString()
	log.record(known, time.Now().Add(-30*time.Millisecond))
	body := []byte(`{"id":"x","payload":{}}`)
	url0, url1 := rcv.endpoints[0].url, rcv.endpoints[1].url

	postSteps(t, rcv, body, []receiverStep{
		{"valid first arrival", url0, known, time.Now(), []signer.Key{key}, 204, endpointCounts{Unique: 1}},
		{"same webhook-id again", url0, known, time.Now(), []signer.Key{key}, 204, endpointCounts{Unique: 1, Duplicates: 1}},
		{"wrong key", url0, known, time.Now(), []signer.Key{otherKey}, 400, endpointCounts{Unique: 1, Duplicates: 1, BadSignatures: 1}},
		{"no signature", url0, known, time.Now(), nil, 400, endpointCounts{Unique: 1, Duplicates: 1, BadSignatures: 2}},
		{"stale timestamp", url0, known, time.Now().Add(-time.Hour), []signer.Key{key}, 400, endpointCounts{Unique: 1, Duplicates: 1, BadSignatures: 3}},
		{"endpoint without secret yet", url1, known, time.Now(), []signer.Key{key}, 400, endpointCounts{Unique: 1, Duplicates: 1, BadSignatures: 4}},
		{"event not published by this run", url0, unknown, time.Now(), []signer.Key{key}, 204, endpointCounts{Unique: 1, Duplicates: 1, BadSignatures: 4, Unknown: 1}},
	})
	lat := rcv.latencies(false)
	if len(lat) != 1 || lat[0] < 30*time.Millisecond || lat[0] > 10*time.Second {
		t.Errorf("latencies %v, want one of at least 30ms", lat)
	}
	if got := rcv.healthyUnique.Load(); got != 1 {
		t.Errorf("healthy unique %d, want 1", got)
	}
	if rcv.lastArrival.Load() == 0 {
		t.Error("last arrival not recorded")
	}
}

// armedReceivers starts n receivers on their own ports, the first hanging
// ones hanging, all verifying with one secret, whose key it returns. The
// caller closes them.
func armedReceivers(t *testing.T, n, hanging int, log *publishLog) (*receivers, signer.Key) {
	t.Helper()
	return armedReceiversWith(t, n, hanging, log, receiverOptions{})
}

// armedReceiversWith is armedReceivers served as opts says.
func armedReceiversWith(t *testing.T, n, hanging int, log *publishLog, opts receiverOptions) (*receivers, signer.Key) {
	t.Helper()
	rcv, err := startReceiversWith(n, hanging, n, log, opts)
	if err != nil {
		t.Fatal(err)
	}
	secret, key := mustSecret(t)
	for i := range n {
		if err := rcv.setSecret(i, secret); err != nil {
			t.Fatal(err)
		}
	}
	return rcv, key
}

func TestHangingReceiverNeverAnswers(t *testing.T) {
	log := newPublishLog(2)
	rcv, key := armedReceivers(t, 2, 1, log)
	id := uuid.NewString()
	log.record(id, time.Now())
	body := []byte(`{}`)

	// The client's timeout plays the engine's delivery timeout.
	short := &http.Client{Timeout: 200 * time.Millisecond}
	if status, err := post(t, short, rcv.endpoints[0].url, id, time.Now(), body, key); err == nil {
		t.Fatalf("hanging endpoint answered %d", status)
	}
	if status, err := post(t, short, rcv.endpoints[1].url, id, time.Now(), body, key); err != nil || status != 204 {
		t.Fatalf("healthy endpoint: %d, %v", status, err)
	}
	if got := rcv.healthyUnique.Load(); got != 1 {
		t.Errorf("healthy unique %d, want 1 (the hanging arrival must not count as healthy)", got)
	}
	if n := len(rcv.latencies(true)); n != 1 {
		t.Errorf("hanging latencies %d, want 1", n)
	}
	// The engine retries what timed out: a repeat at a hanging endpoint is
	// expected and must not count as a duplicate delivery.
	if _, err := post(t, short, rcv.endpoints[0].url, id, time.Now(), body, key); err == nil {
		t.Fatal("hanging endpoint answered a retry")
	}
	if c := rcv.counts(); c.Duplicates != 0 || c.HangRetries != 1 {
		t.Errorf("counts %+v, want 0 duplicates and 1 hanging retry", c)
	}

	// A request still held when the receivers close must fail, not turn
	// into a 200.
	done := make(chan error, 1)
	go func() {
		_, err := post(t, &http.Client{Timeout: 30 * time.Second}, rcv.endpoints[0].url, uuid.NewString(), time.Now(), body, key)
		done <- err
	}()
	// Wait until the endpoint holds it: its arrival is counted before the
	// hold, and the counters are the only state the receivers show, so
	// this polls them.
	for deadline := time.Now().Add(5 * time.Second); rcv.counts().Unknown < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the held request never reached the hanging endpoint")
		}
	}
	rcv.close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("held request succeeded when the receivers closed")
		}
	case <-time.After(10 * time.Second):
		t.Error("held request not released by close")
	}
}

func TestWaitHealthyHonoursContext(t *testing.T) {
	rcv, err := startReceivers(1, 0, 1, newPublishLog(1))
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if rcv.waitHealthy(ctx, 1) {
		t.Fatal("waitHealthy reported 1 delivery that never came")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("returned before the deadline: %v", ctx.Err())
	}
	rcv.healthyUnique.Add(1)
	if !rcv.waitHealthy(context.Background(), 1) {
		t.Fatal("waitHealthy missed a reached count")
	}
}

// TestFailFirstReceiver checks retrystorm's receivers: the first attempt of
// each delivery is refused with 500, the second accepted, and a third is a
// duplicate; endpoints not armed accept first attempts.
func TestFailFirstReceiver(t *testing.T) {
	log := newPublishLog(4)
	rcv, key := armedReceivers(t, 2, 0, log)
	defer rcv.close()
	rcv.refuseFirst(0)
	a, b, c := uuid.NewString(), uuid.NewString(), uuid.NewString()
	for _, id := range []string{a, b, c} {
		log.record(id, time.Now())
	}
	body := []byte(`{}`)
	failing, plain := rcv.endpoints[0].url, rcv.endpoints[1].url
	keys := []signer.Key{key}
	postSteps(t, rcv, body, []receiverStep{
		{"first attempt of a", failing, a, time.Now(), keys, 500, endpointCounts{FirstFails: 1}},
		{"retry of a", failing, a, time.Now(), keys, 204, endpointCounts{Unique: 1, FirstFails: 1}},
		{"a third time", failing, a, time.Now(), keys, 204, endpointCounts{Unique: 1, Duplicates: 1, FirstFails: 1}},
		{"first attempt of b", failing, b, time.Now(), keys, 500, endpointCounts{Unique: 1, Duplicates: 1, FirstFails: 2}},
		{"first attempt of c, not armed", plain, c, time.Now(), keys, 204, endpointCounts{Unique: 2, Duplicates: 1, FirstFails: 2}},
	})
	if gaps := rcv.retryGaps(); len(gaps) != 1 || gaps[0] < 0 {
		t.Errorf("retry gaps %v, want one: a's", gaps)
	}
	first, last := rcv.firstArrival.Load(), rcv.lastArrival.Load()
	if first == 0 || last < first {
		t.Errorf("arrivals first %d, last %d", first, last)
	}
}
