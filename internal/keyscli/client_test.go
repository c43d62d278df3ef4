package keyscli_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/keyscli"
)

// TestClient lists, rolls and revokes through a real internal API, and
// reads its refusals.
func TestClient(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	first := e.issue(t, "m/1") // a merchant id needing escapes
	c := keyscli.NewClient(e.url+"/", testToken)

	keys, err := c.List(ctx, "m/1")
	if err != nil || len(keys) != 1 || keys[0].ID != first.ID.String() || keys[0].Prefix == nil || *keys[0].Prefix != first.Prefix {
		t.Fatalf("List = %+v, %v", keys, err)
	}
	hour := int64(3600)
	rolled, err := c.Roll(ctx, "m/1", first.ID.String(), &hour)
	if err != nil || rolled.Secret == "" || rolled.Status != "active" {
		t.Fatalf("Roll = %+v, %v", rolled, err)
	}
	revoked, err := c.Revoke(ctx, "m/1", rolled.ID)
	if err != nil || revoked.RevokedAt == nil || revoked.Status != "revoked" {
		t.Fatalf("Revoke = %+v, %v", revoked, err)
	}
	k, err := e.store.APIKeys.GetAPIKey(ctx, "m/1", uuid.MustParse(rolled.ID))
	if err != nil || k.RevokedAt == nil {
		t.Fatalf("the stored key after Revoke: %+v, %v", k, err)
	}

	for _, tc := range []struct {
		name   string
		call   func() error
		status int
		code   string
	}{
		{"another merchant's key", func() error { _, err := c.Revoke(ctx, "m2", first.ID.String()); return err }, 404, "resource_not_found"},
		{"a malformed key id", func() error { _, err := c.Revoke(ctx, "m/1", "k 1"); return err }, 400, "parameter_invalid"},
		{"a rolled key", func() error { _, err := c.Roll(ctx, "m/1", first.ID.String(), nil); return err }, 409, "conflict"},
		{"a wrong token", func() error { _, err := keyscli.NewClient(e.url, "wrong").List(ctx, "m/1"); return err }, 401, "authentication_required"},
	} {
		err := tc.call()
		var apiErr *keyscli.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != tc.status || apiErr.Code != tc.code {
			t.Errorf("%s: %v, want %d %s", tc.name, err, tc.status, tc.code)
		}
		if keyscli.IsUnauthorized(err) != (tc.status == http.StatusUnauthorized) {
			t.Errorf("%s: IsUnauthorized = %t", tc.name, keyscli.IsUnauthorized(err))
		}
	}
}

// TestClientListsEveryPage: List follows the list's pages to the end, so
// that a merchant with more keys than a page holds sees all of them, each
// once, newest first.
func TestClientListsEveryPage(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	const n = 105 // more than one page of the largest limit
	issued := map[string]bool{}
	for range n {
		issued[e.issue(t, "m_many").ID.String()] = true
	}
	keys, err := keyscli.NewClient(e.url, testToken).List(ctx, "m_many")
	if err != nil || len(keys) != n {
		t.Fatalf("List = %d keys, %v; want %d", len(keys), err, n)
	}
	for _, k := range keys {
		if !issued[k.ID] {
			t.Errorf("key %s listed twice or not the merchant's", k.ID)
		}
		delete(issued, k.ID)
	}
}
