package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/pollcli"
	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/signer"
)

// newPollHarness is the harness with a real dispatcher as its Publisher
// and Poller (the worker is not run: nothing of a poll subscription is
// ever attempted, and TestPollNeverDialled checks that with the sweeper).
func newPollHarness(t *testing.T, configure ...func(*admin.Config)) *harness {
	t.Helper()
	return newHarness(t, append(configure, withPoller(t))...)
}

// withPoller gives the API a real dispatcher as its Publisher and Poller,
// closed when t ends.
func withPoller(t testing.TB) func(*admin.Config) {
	return func(cfg *admin.Config) {
		opt := cfg.Redis.(*redis.Client).Options()
		sealer, err := signer.NewSealer(cfg.MasterKey)
		if err != nil {
			t.Fatal(err)
		}
		d, err := dispatcher.New(dispatcher.Config{
			Store: cfg.Store, Redis: asynq.RedisClientOpt{Network: opt.Network, Addr: opt.Addr},
			AllowHTTPTargets: true, AllowPrivateTargets: true, Sealer: sealer, MasterKey: cfg.MasterKey,
			DefaultAPIVersion: admin.DefaultVersion,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		usePipeline(cfg, d)
	}
}

// subscribePoll creates a poll subscription of key's merchant with the
// extra fields, and returns it.
func (h *harness) subscribePoll(key string, extra map[string]any) subscription {
	h.t.Helper()
	body := map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "poll"}}
	for k, v := range extra {
		body[k] = v
	}
	r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: body})
	if r.Status != http.StatusCreated {
		h.t.Fatalf("create poll subscription: %d %s", r.Status, r.Body)
	}
	return decode[subscription](h.t, r)
}

// poll reads sub's line with the query q and expects a page.
func (h *harness) poll(key, subID string, q url.Values) pollcli.Page {
	h.t.Helper()
	r := h.pollRaw(key, subID, q)
	if r.Status != http.StatusOK {
		h.t.Fatalf("poll %s?%s: %d %s", subID, q.Encode(), r.Status, r.Body)
	}
	return decode[pollcli.Page](h.t, r)
}

func (h *harness) pollRaw(key, subID string, q url.Values) response {
	h.t.Helper()
	return h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + subID + "/poll?" + q.Encode(), Key: key})
}

// verifyPolled checks every item with the published Standard Webhooks
// library and with package receiver, on the body string as sent.
func verifyPolled(t *testing.T, secret string, items []pollcli.Item) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		h := http.Header{}
		h.Set("webhook-id", it.ID)
		h.Set("webhook-timestamp", it.Timestamp)
		h.Set("webhook-signature", it.Signature)
		if err := wh.Verify([]byte(it.Body), h); err != nil {
			t.Fatalf("standard webhooks library refuses item %s: %v", it.DeliveryID, err)
		}
		if err := ours.VerifyValues(it.ID, it.Timestamp, it.Signature, []byte(it.Body)); err != nil {
			t.Fatalf("receiver refuses item %s: %v", it.DeliveryID, err)
		}
	}
}

// eventIDOf reads the envelope's id of an item, from its event object.
func eventIDOf(t *testing.T, it pollcli.Item) string {
	t.Helper()
	var env struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(it.Event, &env); err != nil {
		t.Fatalf("item event: %v: %s", err, it.Event)
	}
	if env.ID != it.ID {
		t.Fatalf("webhook-id %s is not the envelope's id %s", it.ID, env.ID)
	}
	return env.ID
}

// TestPollPagesEveryEventOnce: 100 events read 7 at a time: every event
// exactly once across the pages, in publish order, each item verified with
// the Standard Webhooks library and package receiver; the same iterator
// read again gives the same page; moving on acknowledges, and an
// acknowledged delivery is succeeded with one attempt whose trigger is
// poll. The subscription read shows the backlog shrinking and the last
// read.
func TestPollPagesEveryEventOnce(t *testing.T) {
	t.Parallel()
	h := newPollHarness(t)
	key := h.merchant("m1")
	sub := h.subscribePoll(key, nil)
	if sub.URL != "poll" {
		t.Errorf("url = %q, want poll", sub.URL)
	}
	const n = 100
	var published []string
	for i := range n {
		published = append(published, h.publish("m1", "payout.paid", fmt.Sprintf(`{"id":"po_%d","amount":%d}`, i, i)).ID)
	}
	got := h.getSubscriptionJSON(key, sub.ID)
	if p, _ := got["poll"].(map[string]any); p == nil || p["backlog"] != float64(n) || p["last_read_at"] != nil {
		t.Fatalf("poll state before any read = %v, want backlog %d, never read", got["poll"], n)
	}
	// The list reads every poll line of its page at once, and shows it as
	// the read does; an HTTP endpoint beside it has none.
	h.createSubscription(key, hookBody("https://example.com/h"))
	r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key})
	listed := decode[struct {
		Data []map[string]any `json:"data"`
	}](t, r)
	for _, s := range listed.Data {
		p, _ := s["poll"].(map[string]any)
		switch {
		case s["id"] == sub.ID && (p == nil || p["backlog"] != float64(n)):
			t.Fatalf("the list shows the poll subscription's line as %v, want backlog %d", s["poll"], n)
		case s["id"] != sub.ID && s["poll"] != nil:
			t.Fatalf("the list shows a line for an HTTP endpoint: %v", s["poll"])
		}
	}
	if len(listed.Data) != 2 {
		t.Fatalf("the list holds %d subscriptions, want 2: %s", len(listed.Data), r.Body)
	}

	var read []string
	var firstIDs []string
	iterator := ""
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("more pages than events")
		}
		q := url.Values{"limit": {"7"}}
		if iterator != "" {
			q.Set("iterator", iterator)
		}
		p := h.poll(key, sub.ID, q)
		if len(p.Data) > 7 {
			t.Fatalf("page of %d with limit 7", len(p.Data))
		}
		verifyPolled(t, sub.Secret, p.Data)
		again := h.poll(key, sub.ID, q) // the same iterator: the same page
		if len(again.Data) != len(p.Data) || again.Iterator != p.Iterator {
			t.Fatalf("page read again differs: %d items, iterator %q; first %d, %q", len(again.Data), again.Iterator, len(p.Data), p.Iterator)
		}
		for i := range p.Data {
			if again.Data[i].DeliveryID != p.Data[i].DeliveryID || again.Data[i].Body != p.Data[i].Body {
				t.Fatalf("item %d read again differs", i)
			}
		}
		for _, it := range p.Data {
			read = append(read, eventIDOf(t, it))
		}
		if pages == 0 {
			for _, it := range p.Data {
				firstIDs = append(firstIDs, it.DeliveryID)
			}
		}
		iterator = p.Iterator
		if p.Done {
			break
		}
	}
	if !slices.Equal(read, published) {
		t.Fatalf("read %d events, want the %d published once each in order", len(read), len(published))
	}
	// The last page is acknowledged by reading its iterator: an empty page.
	last := h.poll(key, sub.ID, url.Values{"iterator": {iterator}})
	if len(last.Data) != 0 || !last.Done {
		t.Fatalf("after the last page: %d items, done %v", len(last.Data), last.Done)
	}
	for _, id := range firstIDs {
		r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_deliveries/" + id, Key: key})
		d := decode[delivery](t, r)
		if d.Status != "succeeded" || len(d.Attempts) != 1 || d.Attempts[0].Trigger != "poll" || d.Attempts[0].Status != "succeeded" {
			t.Fatalf("acknowledged delivery = %+v, want succeeded with one poll attempt", d)
		}
		if d.NextAttemptAt != nil {
			t.Errorf("acknowledged delivery due at %v", d.NextAttemptAt)
		}
	}
	got = h.getSubscriptionJSON(key, sub.ID)
	if p, _ := got["poll"].(map[string]any); p == nil || p["backlog"] != float64(0) || p["last_read_at"] == nil {
		t.Fatalf("poll state after reading all = %v, want backlog 0 and a last read", got["poll"])
	}
	// Without an iterator the read starts after what is acknowledged.
	if p := h.poll(key, sub.ID, nil); len(p.Data) != 0 {
		t.Fatalf("a fresh read after everything was acknowledged returned %d items", len(p.Data))
	}
}

// getSubscriptionJSON reads a subscription as a map.
func (h *harness) getSubscriptionJSON(key, id string) map[string]any {
	h.t.Helper()
	r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + id, Key: key})
	if r.Status != http.StatusOK {
		h.t.Fatalf("get subscription: %d %s", r.Status, r.Body)
	}
	return r.JSON(h.t)
}

// TestPollSince: since starts at the first delivery made at or after it,
// acknowledged ones included; older than the retention is 400.
func TestPollSince(t *testing.T) {
	t.Parallel()
	h := newPollHarness(t)
	key := h.merchant("m1")
	sub := h.subscribePoll(key, map[string]any{"payload_style": "thin"})
	var events []event
	for i := range 6 {
		events = append(events, h.publish("m1", "payout.paid", fmt.Sprintf(`{"id":"po_%d"}`, i)))
	}
	all := h.poll(key, sub.ID, nil)
	if len(all.Data) != 6 {
		t.Fatalf("read %d, want 6", len(all.Data))
	}
	verifyPolled(t, sub.Secret, all.Data)
	var thin struct {
		Data struct {
			ObjectID string `json:"object_id"`
		} `json:"data"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(all.Data[0].Event, &thin); err != nil || thin.Data.ObjectID != "po_0" || thin.Payload != nil {
		t.Fatalf("thin item event = %s, want a reference to po_0 and no payload", all.Data[0].Event)
	}
	h.poll(key, sub.ID, url.Values{"iterator": {all.Iterator}}) // acknowledge all six

	since := events[3].CreatedAt
	p := h.poll(key, sub.ID, url.Values{"since": {since}})
	var ids []string
	for _, it := range p.Data {
		ids = append(ids, it.ID)
	}
	if want := []string{events[3].ID, events[4].ID, events[5].ID}; !slices.Equal(ids, want) {
		t.Fatalf("since %s read %v, want %v", since, ids, want)
	}
	old := time.Now().Add(-31 * 24 * time.Hour).UTC().Format(time.RFC3339)
	expectParam(t, h.pollRaw(key, sub.ID, url.Values{"since": {old}}), "since")
	expectParam(t, h.pollRaw(key, sub.ID, url.Values{"since": {"yesterday"}}), "since")
	expectParam(t, h.pollRaw(key, sub.ID, url.Values{"since": {since}, "iterator": {all.Iterator}}), "since")
}

// expectParam checks a 400 parameter_invalid naming param.
func expectParam(t *testing.T, r response, param string) {
	t.Helper()
	m := expectError(t, r, http.StatusBadRequest, "parameter_invalid")
	if m["param"] != param {
		t.Fatalf("param = %v, want %s; %s", m["param"], param, r.Body)
	}
}

// TestPollLongPollWokenByPublish: an empty read with wait answers as soon
// as an event is published, woken through Redis. The median over 20 tries
// is logged; the test only asserts that each answered, with the event,
// well before its wait elapsed.
func TestPollLongPollWokenByPublish(t *testing.T) {
	t.Parallel()
	h := newPollHarness(t)
	key := h.merchant("m1")
	sub := h.subscribePoll(key, nil)
	iterator := h.poll(key, sub.ID, nil).Iterator
	const wait = 20 * time.Second
	var latencies []time.Duration
	for i := range 20 {
		type answer struct {
			page pollcli.Page
			err  error
			at   time.Time
		}
		done := make(chan answer, 1)
		go func() {
			q := url.Values{"iterator": {iterator}, "wait": {strconv.Itoa(int(wait / time.Second))}}
			req, _ := http.NewRequest(http.MethodGet, h.public.URL+"/v1/webhook_subscriptions/"+sub.ID+"/poll?"+q.Encode(), nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			var p pollcli.Page
			err = json.NewDecoder(resp.Body).Decode(&p)
			done <- answer{page: p, err: err, at: time.Now()}
		}()
		// The read must be waiting before the publish for the wake-up to
		// be what answers it: wait until its subscription to the
		// subscription's channel shows in Redis.
		if !eventually(5*time.Second, func() bool {
			n, err := h.redis.PubSubNumSub(t.Context(), "webhookd:poll:{"+sub.ID+"}").Result()
			return err == nil && n["webhookd:poll:{"+sub.ID+"}"] > 0
		}) {
			t.Fatal("the long poll never waited on its channel")
		}
		published := time.Now()
		ev := h.publish("m1", "payout.paid", fmt.Sprintf(`{"id":"po_%d"}`, i))
		a := <-done
		if a.err != nil {
			t.Fatal(a.err)
		}
		if len(a.page.Data) != 1 || a.page.Data[0].ID != ev.ID {
			t.Fatalf("long poll answered %+v, want the event %s", a.page, ev.ID)
		}
		took := a.at.Sub(published)
		if took >= wait {
			t.Fatalf("long poll answered after %v, its whole wait", took)
		}
		latencies = append(latencies, took)
		iterator = a.page.Iterator
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	t.Logf("long poll woken by a publish: p50 %v, max %v over %d tries (publish call to answer)", latencies[len(latencies)/2],
		latencies[len(latencies)-1], len(latencies))
}

// TestPollRefusals: another merchant's subscription is 404; a bad,
// forged or foreign iterator, limit and wait out of range are 400
// parameter_invalid naming the parameter; a subscription that is not a
// poll one is 400; a url beside a poll destination is 400 naming url; a
// redeliver of a poll delivery is 400; a poll subscription cannot become
// an HTTP one.
func TestPollRefusals(t *testing.T) {
	t.Parallel()
	h := newPollHarness(t)
	key, other := h.merchant("m1"), h.merchant("m2")
	sub := h.subscribePoll(key, nil)
	second := h.subscribePoll(key, nil)
	h.publish("m1", "payout.paid", `{"id":"po_1"}`)
	p := h.poll(key, sub.ID, nil)

	r := h.pollRaw(other, sub.ID, nil)
	expectError(t, r, http.StatusNotFound, "resource_not_found")
	r = h.pollRaw(other, sub.ID, url.Values{"iterator": {p.Iterator}})
	expectError(t, r, http.StatusNotFound, "resource_not_found")

	foreign := h.poll(key, second.ID, nil).Iterator
	tampered := []byte(p.Iterator)
	tampered[len(tampered)-3] ^= 1
	for _, tc := range []struct {
		name  string
		q     url.Values
		param string
	}{
		{"garbage iterator", url.Values{"iterator": {"nope"}}, "iterator"},
		{"empty iterator", url.Values{"iterator": {""}}, "iterator"},
		{"tampered iterator", url.Values{"iterator": {string(tampered)}}, "iterator"},
		{"another subscription's iterator", url.Values{"iterator": {foreign}}, "iterator"},
		{"limit 0", url.Values{"limit": {"0"}}, "limit"},
		{"limit 251", url.Values{"limit": {"251"}}, "limit"},
		{"limit word", url.Values{"limit": {"ten"}}, "limit"},
		{"wait -1", url.Values{"wait": {"-1"}}, "wait"},
		{"wait 31", url.Values{"wait": {"31"}}, "wait"},
		{"wait fraction", url.Values{"wait": {"1.5"}}, "wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectParam(t, h.pollRaw(key, sub.ID, tc.q), tc.param)
		})
	}
	// 250 and 30 are in range.
	h.poll(key, sub.ID, url.Values{"limit": {"250"}, "wait": {"0"}})

	rcv := newHookReceiver(t, http.StatusNoContent)
	web := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": rcv.URL, "events": []string{"*"}}})
	webSub := decode[subscription](t, web)
	expectParam(t, h.pollRaw(key, webSub.ID, nil), "id")

	r = h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": "https://example.com/hooks", "events": []string{"*"}, "destination": map[string]any{"type": "poll"}}})
	expectParam(t, r, "url")
	r = h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "poll", "url": "https://example.com"}}})
	expectParam(t, r, "destination.url")

	r = h.do(request{Method: http.MethodPost, Path: "/v1/webhook_deliveries/" + p.Data[0].DeliveryID + "/redeliver", Key: key})
	expectParam(t, r, "subscription_id")
	r = h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
		Body: map[string]any{"url": rcv.URL, "destination": nil}})
	expectParam(t, r, "destination.type")
}

// TestPollOrderedKeysInSequence: an ordered poll subscription returns each
// key's events in the order they were published, across pages.
func TestPollOrderedKeysInSequence(t *testing.T) {
	t.Parallel()
	h := newPollHarness(t)
	key := h.merchant("m1")
	sub := h.subscribePoll(key, map[string]any{"ordering": map[string]any{"key": "payload.account"}})
	want := map[string][]string{}
	for i := range 30 {
		account := "acc_" + strconv.Itoa(i%3)
		payload := fmt.Sprintf(`{"id":"po_%d","account":%q,"n":%d}`, i, account, i)
		want[account] = append(want[account], h.publish("m1", "payout.paid", payload).ID)
	}
	got := map[string][]string{}
	iterator := ""
	for range 20 {
		q := url.Values{"limit": {"4"}}
		if iterator != "" {
			q.Set("iterator", iterator)
		}
		p := h.poll(key, sub.ID, q)
		for _, it := range p.Data {
			var env struct {
				Payload struct {
					Account string `json:"account"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(it.Event, &env); err != nil {
				t.Fatal(err)
			}
			got[env.Payload.Account] = append(got[env.Payload.Account], it.ID)
		}
		iterator = p.Iterator
		if p.Done {
			break
		}
	}
	for account, ids := range want {
		if !slices.Equal(got[account], ids) {
			t.Errorf("key %s read %v, want %v", account, got[account], ids)
		}
	}
}

// TestPollCommandReadsAndAcknowledges drives `webhookd poll`'s reader
// against the API: without -ack it prints one page and acknowledges
// nothing; with -ack it prints every delivery once and acknowledges them
// all; -follow alone is refused; -follow -ack prints a delivery published
// while it waits, until interrupted.
func TestPollCommandReadsAndAcknowledges(t *testing.T) {
	t.Parallel()
	h := newPollHarness(t)
	key := h.merchant("m1")
	sub := h.subscribePoll(key, nil)
	for i := range 5 {
		h.publish("m1", "payout.paid", fmt.Sprintf(`{"id":"po_%d"}`, i))
	}
	client := pollcli.Client{API: h.public.URL, APIKey: key, HTTP: &http.Client{Timeout: 45 * time.Second}}
	run := func(r pollcli.Reader) ([]string, error) {
		var out, log bytes.Buffer
		r.Client, r.SubscriptionID, r.Out, r.Log = client, sub.ID, &out, &log
		err := r.Run(t.Context())
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if out.Len() == 0 {
			lines = nil
		}
		return lines, err
	}
	lines, err := run(pollcli.Reader{Start: pollcli.Query{Limit: 3}})
	if err != nil || len(lines) != 3 {
		t.Fatalf("one page: %d lines, %v", len(lines), err)
	}
	lines, err = run(pollcli.Reader{Start: pollcli.Query{Limit: 2}, Ack: true})
	if err != nil || len(lines) != 5 {
		t.Fatalf("-ack read %d lines, want the 5 unacknowledged, %v", len(lines), err)
	}
	if p := h.poll(key, sub.ID, nil); len(p.Data) != 0 {
		t.Fatalf("%d deliveries left after -ack", len(p.Data))
	}
	if _, err := run(pollcli.Reader{Follow: true}); err == nil {
		t.Fatal("-follow without -ack accepted")
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- pollcli.Reader{Client: client, SubscriptionID: sub.ID, Ack: true, Follow: true, Out: &out, Log: io.Discard}.Run(ctx)
	}()
	ev := h.publish("m1", "payout.paid", `{"id":"po_late"}`)
	if !eventually(10*time.Second, func() bool { return strings.Contains(out.String(), ev.ID) }) {
		t.Fatalf("-follow never printed the event published while it waited; printed %q", out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("-follow interrupted: %v", err)
	}
}

// TestPollDisabledKeepsItsBacklog: disabling a poll subscription leaves
// what it holds readable and pending; events published while it is
// disabled are skipped deliveries, never read; enabled again, it reads
// the new events after the old ones.
func TestPollDisabledKeepsItsBacklog(t *testing.T) {
	t.Parallel()
	h := newPollHarness(t)
	key := h.merchant("m1")
	sub := h.subscribePoll(key, nil)
	before := h.publish("m1", "payout.paid", `{"id":"po_before"}`)
	setStatus := func(status string) {
		r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key, Body: map[string]any{"status": status}})
		if r.Status != http.StatusOK {
			t.Fatalf("set status %s: %d %s", status, r.Status, r.Body)
		}
	}
	setStatus("disabled")
	during := h.publish("m1", "payout.paid", `{"id":"po_during"}`)
	for _, d := range h.deliveriesOf(key, during.ID) {
		if d.Status != "skipped" {
			t.Fatalf("delivery while disabled is %s, want skipped", d.Status)
		}
	}
	p := h.poll(key, sub.ID, nil)
	if len(p.Data) != 1 || p.Data[0].ID != before.ID {
		t.Fatalf("disabled subscription read %+v, want the event before", p.Data)
	}
	if ds := h.deliveriesOf(key, before.ID); len(ds) != 1 || ds[0].Status != "pending" {
		t.Fatalf("backlog of a disabled subscription = %+v, want pending", ds)
	}
	setStatus("enabled")
	after := h.publish("m1", "payout.paid", `{"id":"po_after"}`)
	p = h.poll(key, sub.ID, url.Values{"iterator": {p.Iterator}})
	if len(p.Data) != 1 || p.Data[0].ID != after.ID {
		t.Fatalf("enabled again read %+v, want only the event after", p.Data)
	}
}
