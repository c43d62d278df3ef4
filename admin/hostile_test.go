package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/store"
)

// The tests of this file are a hostile merchant's attempts to get more
// than its share: a cursor carried from one list to another, a merchant id
// spelt two ways in an internal path, and more subscriptions than the cap.

// TestCursorBoundToList: a cursor pages only the list that issued it; any
// other list answers 400 cursor_mismatch naming cursor.
func TestCursorBoundToList(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withIngestPipeline(t))
	key := h.merchant("m_cursor")
	for range 2 {
		h.createSubscription(key, hookBody("https://example.com/hook"))
	}
	for range 2 {
		h.publish("m_cursor", "payout.paid", `{}`)
	}
	lists := []string{"/v1/events", "/v1/webhook_deliveries", "/v1/webhook_subscriptions"}
	cursors := map[string]string{}
	for _, list := range lists {
		p := decode[page[struct{}]](t, h.do(request{Method: http.MethodGet, Path: list + "?limit=1", Key: key}))
		if p.NextCursor == nil {
			t.Fatalf("%s gave no cursor", list)
		}
		cursors[list] = *p.NextCursor
	}
	for _, from := range lists {
		for _, to := range lists {
			t.Run(from+" to "+to, func(t *testing.T) {
				r := h.with(t).do(request{Method: http.MethodGet, Path: to + "?cursor=" + cursors[from], Key: key})
				if from == to {
					if r.Status != http.StatusOK {
						t.Fatalf("own cursor: %d %s", r.Status, r.Body)
					}
					return
				}
				if m := expectError(t, r, http.StatusBadRequest, "cursor_mismatch"); m["param"] != "cursor" {
					t.Fatalf("param %v, want cursor", m["param"])
				}
			})
		}
	}
}

// TestMerchantPathDecoding: a merchant id in an internal path is
// percent-decoded once, whatever the case of its hex digits, so that an API
// key is issued to the merchant that events are published for.
func TestMerchantPathDecoding(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct {
		name, segment, want string
	}{
		{"upper-case hex", "m%C3%A4x", "mäx"},
		{"lower-case hex", "m%c3%a4x", "mäx"},
		{"mixed-case hex", "m%c3%A4x", "mäx"},
		{"escaped slash, upper case", "m%2Fx", "m/x"},
		{"escaped slash, lower case", "m%2fx", "m/x"},
		{"escaped percent, decoded once", "m%2541", "m%41"},
		{"escaped ASCII letter", "%6d_plain", "m_plain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := h.with(t)
			put := h.doInternal(request{Method: http.MethodPut, Path: "/internal/v1/merchants/" + tc.segment, Body: `{}`})
			if put.Status != http.StatusOK {
				t.Fatalf("put merchant: %d %s", put.Status, put.Body)
			}
			if id := put.JSON(t)["id"]; id != tc.want {
				t.Fatalf("put merchant %s stored %q, want %q", tc.segment, id, tc.want)
			}
			issued := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/merchants/" + tc.segment + "/api_keys",
				Body: `{"scopes":["webhooks:read"]}`})
			if issued.Status != http.StatusCreated {
				t.Fatalf("api key: %d %s", issued.Status, issued.Body)
			}
			keyString, _ := issued.JSON(t)["key"].(string)
			_, m, err := h.store.APIKeys.APIKeyByHash(context.Background(), store.HashAPIKey(keyString))
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != tc.want {
				t.Fatalf("key issued to %q, want %q", m.ID, tc.want)
			}
		})
	}
}

// TestSubscriptionCap: a merchant holds at most MaxSubscriptions
// subscriptions, counted across both surfaces, disabled ones included and
// deleted ones not; beyond it either surface answers 400 parameter_invalid.
func TestSubscriptionCap(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *admin.Config) { c.MaxSubscriptions = 3 })
	key := h.merchant("m_cap")
	other := h.merchant("m_other")
	first := h.createSubscription(key, hookBody("https://example.com/1"))
	h.createSubscription(key, hookBody("https://example.com/2"))
	if r := h.legacy("create", key, "", hookBody("https://example.com/legacy")); r.Status != http.StatusOK {
		t.Fatalf("legacy create: %d %s", r.Status, r.Body)
	}
	disable := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + first.ID, Key: key,
		Body: map[string]any{"status": "disabled"}})
	if disable.Status != http.StatusOK {
		t.Fatalf("disable: %d %s", disable.Status, disable.Body)
	}

	refused := []struct {
		name string
		send func(h *harness) response
	}{
		{"v1", func(h *harness) response {
			return h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: hookBody("https://example.com/4")})
		}},
		{"legacy", func(h *harness) response {
			return h.legacy("create", key, uuid.NewString(), hookBody("https://example.com/4"))
		}},
	}
	for _, tc := range refused {
		t.Run("over the cap on "+tc.name, func(t *testing.T) {
			r := tc.send(h.with(t))
			if tc.name == "legacy" {
				if m := expectLegacyError(t, r, http.StatusBadRequest, "invalid_request_error"); !strings.HasSuffix(m["docUrl"].(string), "#parameter_invalid") {
					t.Fatalf("legacy refusal %s", r.Body)
				}
				return
			}
			m := expectError(t, r, http.StatusBadRequest, "parameter_invalid")
			if m["param"] != "url" || !strings.Contains(m["message"].(string), "at most 3 ") {
				t.Fatalf("refusal %s, want param url and the limit in the message", r.Body)
			}
		})
	}
	if n := h.subscriptionCount("m_cap"); n != 3 {
		t.Fatalf("m_cap holds %d subscriptions, want 3", n)
	}
	h.createSubscription(other, hookBody("https://example.com/other")) // the cap is per merchant

	deleted := h.do(request{Method: http.MethodDelete, Path: "/v1/webhook_subscriptions/" + first.ID, Key: key})
	if deleted.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", deleted.Status, deleted.Body)
	}
	h.createSubscription(key, hookBody("https://example.com/after-delete")) // a deleted one no longer counts
}

// TestSubscriptionCapConcurrent: creates racing each other cannot pass the
// cap together: 20 at once with a cap of 5 make exactly 5.
func TestSubscriptionCapConcurrent(t *testing.T) {
	t.Parallel()
	const attempts, limit = 20, 5
	h := newHarness(t, func(c *admin.Config) { c.MaxSubscriptions = limit })
	key := h.merchant("m_race")
	answers := make(chan int, attempts)
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Go(func() { answers <- createRaw(h.public.URL, key, fmt.Sprintf("https://example.com/%d", i)) })
	}
	wg.Wait()
	close(answers)
	created := 0
	for status := range answers {
		switch status {
		case http.StatusCreated:
			created++
		case http.StatusBadRequest:
		default:
			t.Fatalf("a create answered %d, want 201 or 400 (0: no answer)", status)
		}
	}
	if created != limit || h.subscriptionCount("m_race") != limit {
		t.Fatalf("%d creates answered 201 and %d are stored, want %d", created, h.subscriptionCount("m_race"), limit)
	}
}

// createRaw creates a subscription from any goroutine (the harness fails
// its test on a transport error, which only the test's goroutine may do)
// and returns the answer's status, 0 when there was none.
func createRaw(base, key, target string) int {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/webhook_subscriptions",
		strings.NewReader(fmt.Sprintf(`{"url":%q,"events":["*"]}`, target)))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", uuid.NewString())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
