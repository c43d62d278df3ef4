package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// No credential webhookd handles reaches its logs: a run at debug level
// that issues keys, creates subscriptions on both surfaces, rotates a
// secret, replays an idempotent create (a cached answer holding a secret),
// publishes, delivers, redelivers, sends a test event, and is offered
// wrong keys and tokens, logs none of them.
func TestLogsHoldNoCredential(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t, "WEBHOOKD_LOG_LEVEL=debug")
	e.start()
	base := "http://" + e.public
	key := e.keysCreate("m_logs")
	otherKey := e.keysCreate("m_logs_other")
	credentials := map[string]string{"API key": key, "second API key": otherKey,
		"ingest token": e2eToken, "master key": e2eMasterKey}

	r := newReceiver(t)
	e.subscribe(key, r)
	credentials["signing secret"] = r.secret

	// A key of the other environment, a made-up key and a wrong token are
	// credentials too (one may be real elsewhere).
	wrongEnv := "prod." + strings.TrimPrefix(key, "sandbox.")
	made := "sandbox.c2VjcmV0LXRoYXQtaXMtbm90LWEta2V5LWF0LWFsbA"
	credentials["other environment's key"], credentials["unknown key"] = wrongEnv, made
	credentials["wrong ingest token"] = "wrong-ingest-token-0123456789"
	for _, k := range []string{wrongEnv, made} {
		if status, _ := e.call("GET", base+"/v1/webhook_subscriptions", k, nil); status != 401 {
			t.Errorf("GET with %q: %d, want 401", k, status)
		}
	}
	if status, _ := e.call("POST", "http://"+e.internal+"/internal/v1/events", credentials["wrong ingest token"],
		map[string]any{"merchant_id": "m_logs", "type": "payout.paid", "payload": map[string]any{}}); status != 401 {
		t.Errorf("publish with a wrong token: %d, want 401", status)
	}

	status, subs := e.call("GET", base+"/v1/webhook_subscriptions", key, nil)
	if status != 200 {
		t.Fatalf("list subscriptions: %d", status)
	}
	subID := subs["data"].([]any)[0].(map[string]any)["id"].(string)
	status, rotated := e.call("POST", base+"/v1/webhook_subscriptions/"+subID+"/rotate_secret", key, nil)
	if status != 200 && status != 201 {
		t.Fatalf("rotate_secret: %d %v", status, rotated)
	}
	credentials["rotated signing secret"] = rotated["secret"].(string)
	r.mu.Lock()
	r.secret = rotated["secret"].(string)
	r.mu.Unlock()

	// An idempotent create, twice: the second answer comes from the cache.
	create := func() map[string]any {
		body, _ := json.Marshal(map[string]any{"url": r.URL + "/second", "events": []string{"payout.paid"}})
		req, _ := http.NewRequest("POST", base+"/v1/webhook_subscriptions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "logs-replay")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		if resp.StatusCode != 201 {
			t.Fatalf("idempotent create: %d %v", resp.StatusCode, m)
		}
		return m
	}
	first, replay := create(), create()
	if first["secret"] != replay["secret"] {
		t.Fatalf("the replayed create answered another secret")
	}
	credentials["replayed signing secret"] = first["secret"].(string)

	// The legacy surface shows a secret too.
	legacyBody, _ := json.Marshal(map[string]any{"url": r.URL + "/legacy", "events": []string{"payout.failed"}})
	req, _ := http.NewRequest("POST", base+"/api/service/webhook-subscription/create", bytes.NewReader(legacyBody))
	req.Header.Set("X-Service-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var legacy map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&legacy)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("legacy create: %d %v", resp.StatusCode, legacy)
	}
	credentials["legacy signing secret"] = legacy["secret"].(string)

	id := e.publish("m_logs")
	r.wait(t, id, 15*time.Second)
	status, list := e.call("GET", base+"/v1/webhook_deliveries?event_id="+id, key, nil)
	if status != 200 {
		t.Fatalf("list deliveries: %d", status)
	}
	for _, d := range list["data"].([]any) {
		del := d.(map[string]any)
		if del["subscription_id"] == subID {
			if status, _ := e.call("POST", base+"/v1/webhook_deliveries/"+del["id"].(string)+"/redeliver", key, nil); status != 202 {
				t.Errorf("redeliver: %d", status)
			}
		}
	}
	if status, _ := e.call("POST", base+"/v1/webhook_subscriptions/"+subID+"/send_test_event", key, nil); status != 202 {
		t.Errorf("send_test_event: %d", status)
	}
	waitFor(t, "the redelivery and the test event to arrive", 15*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.got) >= 3
	})
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	_ = e.cmd.Wait()

	logs := e.logs.String()
	if !strings.Contains(logs, `"level":"DEBUG"`) && !strings.Contains(logs, "webhookd stopped") {
		t.Fatalf("the run logged too little to tell:\n%s", logs)
	}
	for what, secret := range credentials {
		for _, form := range []string{secret, strings.TrimPrefix(secret, "whsec_")} {
			if strings.Contains(logs, form) {
				t.Errorf("the logs hold the %s", what)
			}
		}
	}
}
