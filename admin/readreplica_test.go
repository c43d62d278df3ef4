package admin_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestReadsGoToTheReadStore gives the API a read store that is a separate
// database, so that where each route reads is visible: the list and get
// routes answer from it, and every write (creates, updates, deletes,
// idempotency records, authentication's key lookups) leaves it untouched.
func TestReadsGoToTheReadStore(t *testing.T) {
	t.Parallel()
	replica := storetest.NewStore(t)
	// The replica holds its own subscription for m1, made through an API
	// on the replica alone.
	filler := newHarness(t, func(c *admin.Config) { c.Store = replica })
	fillerKey, err := merchants.NewKeyIssuer(replica.APIKeys, "sandbox", admin.DefaultVersion).Issue(context.Background(), "m1",
		[]string{admin.ScopeRead, admin.ScopeWrite})
	if err != nil {
		t.Fatal(err)
	}
	onReplica := filler.createSubscription(fillerKey, hookBody("https://replica.example/h"))
	recordDelivery(t, replica, "m1", uuid.MustParse(onReplica.ID), false, attemptAt{time.Now(), true})
	var eventID, deliveryID string
	if err := replica.Pool().QueryRow(context.Background(), `SELECT event_id::text, id::text FROM deliveries`).Scan(&eventID, &deliveryID); err != nil {
		t.Fatal(err)
	}

	h := newHarness(t, func(c *admin.Config) { c.ReadStore = replica })
	key := h.merchant("m1")
	rows := func() map[string]int {
		counts := map[string]int{}
		for _, table := range []string{"subscriptions", "subscription_secrets", "idempotency_keys", "api_keys", "merchants", "events", "deliveries"} {
			var n int
			if err := replica.Pool().QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			counts[table] = n
		}
		return counts
	}
	before := rows()

	onPrimary := h.createSubscription(key, hookBody("https://primary.example/h"))
	sub := "/v1/webhook_subscriptions/" + onPrimary.ID
	for _, req := range []request{
		{Method: http.MethodPost, Path: sub, Key: key, Body: map[string]any{"description": "changed"}},
		{Method: http.MethodPost, Path: sub + "/rotate_secret", Key: key, Body: map[string]any{}},
	} {
		if r := h.do(req); r.Status >= 300 {
			t.Fatalf("%s %s: %d %s", req.Method, req.Path, r.Status, r.Body)
		}
	}

	// Gets and lists read the replica: the primary's subscription is not
	// there, the replica's is.
	if r := h.do(request{Method: http.MethodGet, Path: sub, Key: key}); r.Status != http.StatusNotFound {
		t.Errorf("GET of the primary's subscription: %d, want 404 from the replica", r.Status)
	}
	if r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + onReplica.ID, Key: key}); r.Status != http.StatusOK {
		t.Errorf("GET of the replica's subscription: %d %s, want 200", r.Status, r.Body)
	}
	list := decode[listPage](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key}))
	if len(list.Data) != 1 || list.Data[0].ID != onReplica.ID {
		t.Errorf("list = %+v, want the replica's one subscription", list.Data)
	}
	// The event and delivery exist on the replica only.
	for path, id := range map[string]string{"/v1/events": eventID, "/v1/webhook_deliveries": deliveryID} {
		page := decode[struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}](t, h.do(request{Method: http.MethodGet, Path: path, Key: key}))
		if len(page.Data) != 1 || page.Data[0].ID != id {
			t.Errorf("GET %s = %+v, want the replica's %s", path, page.Data, id)
		}
		if r := h.do(request{Method: http.MethodGet, Path: path + "/" + id, Key: key}); r.Status != http.StatusOK {
			t.Errorf("GET %s/%s: %d %s, want 200 from the replica", path, id, r.Status, r.Body)
		}
	}
	health := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + onReplica.ID + "/health", Key: key})
	if got := decode[map[string]any](t, health)["attempts_24h"]; health.Status != http.StatusOK || got != float64(1) {
		t.Errorf("health of the replica's subscription: %d, attempts_24h %v; want 200 and the replica's one attempt", health.Status, got)
	}

	// Nothing was written to the replica.
	after := rows()
	for table, n := range before {
		if after[table] != n {
			t.Errorf("replica table %s: %d rows before the writes, %d after", table, n, after[table])
		}
	}
}
