package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestListAPIKeysPage pages through a merchant's keys at several page
// sizes: every key comes once, in ListAPIKeys's order (newest first, ties
// on created_at broken by id), and never another merchant's.
func TestListAPIKeysPage(t *testing.T) {
	t.Parallel()
	clock := newTestClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	st := storetest.NewStore(t, store.WithClock(clock.Now))
	ctx := context.Background()
	for i := range 7 {
		// Keys 2 and 3, and 5 and 6, share their created_at: the id
		// must order them, or a page boundary between them would lose
		// or repeat one.
		if i != 3 && i != 6 {
			clock.Advance(time.Second)
		}
		if _, err := st.APIKeys.CreateAPIKey(ctx, "m_page", "2026-05-01", "sandbox", fmt.Sprintf("sandbox.PAGE%02dkey", i), []string{"webhooks:read"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.APIKeys.CreateAPIKey(ctx, "m_page_other", "2026-05-01", "sandbox", "sandbox.OTHERkey", []string{"webhooks:read"}); err != nil {
		t.Fatal(err)
	}
	all, err := st.APIKeys.ListAPIKeysPage(ctx, "m_page", everyKey)
	if err != nil || len(all) != 7 {
		t.Fatalf("every key: %d keys, %v", len(all), err)
	}

	for _, limit := range []int{1, 2, 3, 6, 7, 100} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			var got []store.APIKey
			p := store.Page{Limit: limit}
			for range 10 {
				rows, err := st.APIKeys.ListAPIKeysPage(ctx, "m_page", p)
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) > limit+1 {
					t.Fatalf("%d rows for limit %d", len(rows), limit)
				}
				more := len(rows) > limit
				rows = rows[:min(len(rows), limit)]
				got = append(got, rows...)
				if !more {
					break
				}
				last := rows[len(rows)-1]
				p.After = &store.Cursor{CreatedAt: last.CreatedAt, ID: last.ID.String()}
			}
			if len(got) != len(all) {
				t.Fatalf("paged %d keys, want %d", len(got), len(all))
			}
			for i := range all {
				if got[i].ID != all[i].ID || got[i].MerchantID != "m_page" {
					t.Errorf("key %d: %s of %s, want %s", i, got[i].ID, got[i].MerchantID, all[i].ID)
				}
			}
		})
	}

	if rows, err := st.APIKeys.ListAPIKeysPage(ctx, "m_nobody", store.Page{Limit: 10}); err != nil || len(rows) != 0 {
		t.Errorf("unknown merchant: %d keys, %v", len(rows), err)
	}
	if _, err := st.APIKeys.ListAPIKeysPage(ctx, "m_page", store.Page{Limit: 10, After: &store.Cursor{ID: "not-a-uuid"}}); err == nil {
		t.Error("a cursor id that is no UUID was accepted")
	}
}

// everyKey is a page larger than any merchant's keys in these tests: all
// of them, newest first.
var everyKey = store.Page{Limit: 1000}
