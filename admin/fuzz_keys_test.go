package admin_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/merchants"
)

// FuzzRollKeyBody sends arbitrary bodies to the roll route, each input
// rolling a fresh key (a rolled key cannot be rolled again, which would
// leave the accepted path unexplored): no answer is a 5xx, a refusal is
// spec 7's error, and an accepted roll made a successor of the old key's
// scopes and set the old key's expiry to the overlap sent, or a day.
func FuzzRollKeyBody(f *testing.F) {
	h := startHarness(f)
	for _, s := range []string{``, `{}`, `{"overlap_seconds":0}`, `{"overlap_seconds":3600}`, `{"overlap_seconds":2592000}`,
		`{"overlap_seconds":2592001}`, `{"overlap_seconds":-1}`, `{"overlap_seconds":1.5}`, `{"overlap_seconds":"60"}`,
		`{"overlap_seconds":null}`, `{"overlap_seconds":1e3}`, `{"overlap":60}`, `null`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		h := h.with(t)
		ctx := context.Background()
		old, err := merchants.NewKeyIssuer(h.store.APIKeys, "sandbox", admin.DefaultVersion).Create(ctx, "m_roll", []string{admin.ScopeRead})
		if err != nil {
			t.Fatal(err)
		}
		before := h.store.Now()
		r := h.doInternal(request{Method: "POST", Path: "/internal/v1/merchants/m_roll/api_keys/" + old.ID.String() + "/roll", Body: body})
		noServerError(t, r)
		if r.Status != 201 {
			checkRefusal(t, r, false)
			return
		}
		in := decodeAs[struct {
			OverlapSeconds *int64 `json:"overlap_seconds"`
		}](t, body)
		overlap := merchants.DefaultRollOverlap
		if in.OverlapSeconds != nil {
			overlap = time.Duration(*in.OverlapSeconds) * time.Second
		}
		rolled, err := h.store.APIKeys.GetAPIKey(ctx, "m_roll", old.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rolled.ExpiresAt == nil || rolled.ExpiresAt.Before(before.Add(overlap)) || rolled.ExpiresAt.After(h.store.Now().Add(overlap)) {
			t.Fatalf("body %q: the old key expires at %v, want now + %v", body, rolled.ExpiresAt, overlap)
		}
		successor := r.JSON(t)
		id, _ := successor["id"].(string)
		k, err := h.store.APIKeys.GetAPIKey(ctx, "m_roll", uuid.MustParse(id))
		if err != nil || len(k.Scopes) != 1 || k.Scopes[0] != admin.ScopeRead {
			t.Fatalf("body %q: successor %+v, %v", body, k, err)
		}
	})
}
