package admin_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/signer"
)

// Secrets at rest, read from the raw Postgres rows: API keys, signing
// secrets and the idempotency cache hold no secret in any encoding.

// tables lists the database's tables, partitioned ones once (not each
// partition: reading the parent reads every partition's rows).
func tables(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `
		SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// databaseRows is every row of every table as Postgres writes it as text,
// sorted, by table. idempotency_keys is left out: a refused POST claims and
// releases its key, which is no change to anyone's resources.
func databaseRows(t *testing.T, pool *pgxpool.Pool) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, table := range tables(t, pool) {
		if table == "idempotency_keys" {
			continue
		}
		rows, err := pool.Query(t.Context(), `SELECT r::text FROM `+pgx.Identifier{table}.Sanitize()+` r ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		if out[table], err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// rowsEqual compares two databaseRows and logs every row that differs.
func rowsEqual(t *testing.T, before, after map[string][]string) bool {
	t.Helper()
	equal := true
	for table, rows := range after {
		for _, r := range rows {
			if !slices.Contains(before[table], r) {
				t.Logf("%s: row now %s", table, r)
				equal = false
			}
		}
		for _, r := range before[table] {
			if !slices.Contains(rows, r) {
				t.Logf("%s: row was %s", table, r)
				equal = false
			}
		}
	}
	return equal
}

// column is one column of one table.
type column struct{ table, name, dataType string }

// columns lists every column of every table (see tables).
func columns(t *testing.T, pool *pgxpool.Pool) []column {
	t.Helper()
	var out []column
	for _, table := range tables(t, pool) {
		rows, err := pool.Query(t.Context(), `SELECT column_name, data_type FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
		if err != nil {
			t.Fatal(err)
		}
		cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
			c := column{table: table}
			return c, r.Scan(&c.name, &c.dataType)
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cols...)
	}
	return out
}

// values reads every non-null value of a column: bytea as its bytes,
// anything else (text, jsonb, arrays, …) as Postgres writes it as text.
func (c column) values(t *testing.T, pool *pgxpool.Pool) [][]byte {
	t.Helper()
	expr := pgx.Identifier{c.name}.Sanitize()
	if c.dataType != "bytea" {
		expr += "::text"
	}
	rows, err := pool.Query(t.Context(), `SELECT `+expr+` FROM `+pgx.Identifier{c.table}.Sanitize()+
		` WHERE `+pgx.Identifier{c.name}.Sanitize()+` IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// needles are the forms a secret could be written in: as shown, its
// encoded part alone, its raw bytes, and those bytes in hex and in every
// base64 alphabet.
type needles map[string][]byte

func (n needles) add(name, shown, encoded string, raw []byte) {
	n[name+" as shown"] = []byte(shown)
	n[name+" without its prefix"] = []byte(encoded)
	n[name+" raw"] = raw
	n[name+" in hex"] = []byte(hex.EncodeToString(raw))
	for enc, e := range map[string]*base64.Encoding{"std": base64.StdEncoding, "raw std": base64.RawStdEncoding,
		"url": base64.URLEncoding, "raw url": base64.RawURLEncoding} {
		n[name+" in base64 "+enc] = []byte(e.EncodeToString(raw))
	}
}

func (n needles) addSigningSecret(t *testing.T, name, secret string) {
	t.Helper()
	raw, err := signer.ParseSecret(secret)
	if err != nil {
		t.Fatalf("%s %q: %v", name, secret, err)
	}
	n.add(name, secret, strings.TrimPrefix(secret, "whsec_"), raw)
}

func (n needles) addAPIKey(t *testing.T, name, key string) {
	t.Helper()
	_, encoded, _ := strings.Cut(key, ".")
	raw, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil || len(raw) != 32 {
		t.Fatalf("%s is not a prefix and 32 bytes in base64url: %v", name, err)
	}
	n.add(name, key, encoded, raw)
}

// TestNoSecretInTheDatabase makes API keys (directly and on the internal
// route), subscriptions on both surfaces, secret rotations and idempotent
// POSTs whose cached answers hold a signing secret, runs deliveries, then
// reads every column of every table raw: no key, signing secret, ingest
// token or master key is there in any form. The API keys are there as
// their SHA-256 alone, every stored signing secret opens with the master
// key to one that was shown, and the cached answers replay the secrets they
// hide. A canary in an event's payload must be found, so the scan reads
// what is stored.
func TestNoSecretInTheDatabase(t *testing.T) {
	t.Parallel()
	h, a, b := newTenants(t)
	n := needles{}
	n.add("ingest token", testIngestToken, testIngestToken, []byte(testIngestToken))
	n.add("master key", string(h.cfg.MasterKey), base64.StdEncoding.EncodeToString(h.cfg.MasterKey), h.cfg.MasterKey)
	keys := []string{a.key, b.key}
	shown := []string{a.sub.Secret, a.spare.Secret, a.poll.Secret, b.sub.Secret, b.spare.Secret, b.poll.Secret}

	r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/merchants/m_a/api_keys",
		Body: map[string]any{"scopes": []string{"webhooks:read"}}})
	if r.Status != http.StatusCreated {
		t.Fatalf("internal api key: %d %s", r.Status, r.Body)
	}
	keys = append(keys, decode[struct{ Key string }](t, r).Key)

	// Idempotent POSTs whose answers hold a secret, each sent twice: the
	// second answer comes from the cache.
	for _, req := range []request{
		{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Body: hookBody("https://example.com/idem")},
		{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + a.sub.ID + "/rotate_secret"},
		{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + a.sub.ID + "/rotate_secret"},
		{Method: http.MethodPost, Path: legacyPath + "create", Body: hookBody("https://example.com/idem-legacy"),
			Header: map[string]string{"X-Service-Api-Key": a.key}},
	} {
		if req.Header == nil {
			req.Key = a.key
			req.Header = map[string]string{}
		}
		req.Header["Idempotency-Key"] = uuid.NewString()
		first, again := h.do(req), h.do(req)
		secret := decode[subscription](t, first).Secret
		if first.Status/100 != 2 || again.Header.Get("Idempotent-Replayed") != "true" ||
			decode[subscription](t, again).Secret != secret || secret == "" {
			t.Fatalf("%s %s: %d %s, replayed %d %s", req.Method, req.Path, first.Status, first.Body, again.Status, again.Body)
		}
		shown = append(shown, secret)
	}
	for i, k := range keys {
		n.addAPIKey(t, "api key "+string(rune('A'+i)), k)
	}
	for i, s := range shown {
		n.addSigningSecret(t, "signing secret "+string(rune('A'+i)), s)
	}
	canary := "canary-" + uuid.NewString()
	h.publish("m_a", "payout.paid", `{"id":"po_canary","note":"`+canary+`"}`)

	pool := h.store.Pool()
	found := map[string]bool{}
	for _, c := range columns(t, pool) {
		for _, v := range c.values(t, pool) {
			if bytes.Contains(v, []byte(canary)) {
				found[c.table+"."+c.name] = true
			}
			for name, needle := range n {
				if bytes.Contains(v, needle) {
					t.Errorf("%s.%s holds the %s", c.table, c.name, name)
				}
			}
		}
	}
	if !found["events.body"] {
		t.Fatalf("the canary published in an event was found in %v, not in events.body: the scan reads nothing", found)
	}

	// The keys are their SHA-256, the secrets their sealed form, and the
	// cached answers are there to be scanned.
	ctx := context.Background()
	for _, k := range keys {
		sum := sha256.Sum256([]byte(k))
		var count int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE key_hash = $1`, sum[:]).Scan(&count); err != nil || count != 1 {
			t.Errorf("api key not stored as its SHA-256: %d rows, %v", count, err)
		}
	}
	sealer, err := signer.NewSealer(h.cfg.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT ciphertext FROM subscription_secrets`)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) < len(shown) {
		t.Errorf("%d stored secrets, fewer than the %d shown", len(sealed), len(shown))
	}
	for _, c := range sealed {
		if s, err := sealer.Open(c); err != nil || !slices.Contains(shown, s) {
			t.Errorf("a stored secret does not open to one that was shown (%v)", err)
		}
	}
	var cached int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE length(response_body) > 0`).Scan(&cached); err != nil || cached < 4 {
		t.Errorf("%d cached answers (%v), want at least the 4 holding secrets", cached, err)
	}
}
