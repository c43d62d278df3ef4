package keyscli_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

const testToken = "keys-cli-token"

// engine is webhookd's internal API on a fresh database, served on
// 127.0.0.1.
type engine struct {
	store *store.Store
	url   string
}

func newEngine(t *testing.T) *engine {
	t.Helper()
	st := storetest.NewStore(t)
	srv, err := admin.New(admin.Config{Store: st, Environment: "sandbox", MasterKey: bytes.Repeat([]byte{7}, 32),
		IngestToken: testToken, MaxBodyBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Internal())
	t.Cleanup(hs.Close)
	return &engine{store: st, url: hs.URL}
}

// issue makes a key of the merchant.
func (e *engine) issue(t *testing.T, merchant string) merchants.IssuedKey {
	t.Helper()
	k, err := merchants.NewKeyIssuer(e.store.APIKeys, "sandbox", admin.DefaultVersion).
		Create(context.Background(), merchant, []string{admin.ScopeRead, admin.ScopeWrite})
	if err != nil {
		t.Fatal(err)
	}
	return k
}
