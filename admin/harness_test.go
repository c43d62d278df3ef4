package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/kindstest"
	"github.com/webhookd/webhookd/internal/transform"
)

// harness is a webhookd API on a fresh database and a private Redis, served
// by real HTTP servers on 127.0.0.1.
type harness struct {
	t        *testing.T
	cfg      admin.Config
	store    *store.Store
	redis    *redis.Client
	public   *httptest.Server
	internal *httptest.Server
	// lastPublished is when the last publish answered (see publish).
	lastPublished time.Time
}

const testIngestToken = "test-ingest-token"

// omitHeader as a request's header value sends no such header at all. It
// holds a NUL, which no real header value can, so a test (or a fuzz input)
// sending any real value cannot be mistaken for it.
const omitHeader = "\x00omit"

// newHarness starts the API. configure may adjust the Config before the
// server is built.
func newHarness(t *testing.T, configure ...func(*admin.Config)) *harness {
	t.Helper()
	h := startHarness(t, configure...)
	h.t = t
	return h
}

// startHarness is newHarness for a fuzz target, which has a *testing.F:
// the harness it returns has no t, and each fuzz input works on a copy
// given that input's t.
// sandbox is the transformation sandbox every harness of the package
// shares.
var sandbox = transform.NewLazy(transform.Config{})

func startHarness(t testing.TB, configure ...func(*admin.Config)) *harness {
	t.Helper()
	st := databases.newStore(t)
	rd := storetest.NewRedis(t)
	opt, err := redis.ParseURL(rd.URL())
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	reg := prometheus.NewRegistry()
	cfg := admin.Config{
		Store: st, Redis: rc, Registerer: reg, Gatherer: reg,
		Environment: "sandbox", Versions: admin.DefaultVersions(),
		MasterKey: bytes.Repeat([]byte{7}, 32), IngestToken: testIngestToken,
		MaxBodyBytes:     1 << 20,
		EventTypes:       []string{"payout.created", "payout.initiated", "payout.paid", "payout.failed", "deposit.received"},
		AllowHTTPTargets: true, AllowPrivateTargets: true,
		TestEventRate: redis_rate.PerMinute(10),
		Kinds:         kindstest.Registry(t, nil),
		// One sandbox for the package's harnesses, made at the first
		// simulation: compiling its engine takes seconds under -race.
		Transformations: sandbox,
	}
	for _, c := range configure {
		c(&cfg)
	}
	srv, err := admin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	// A configure that gave the API a store of its own (on a clock of the
	// test's) makes it the harness's too, so that h.merchant and the
	// test's reads see what the API sees.
	h := &harness{cfg: cfg, store: cfg.Store, redis: rc,
		public: httptest.NewServer(srv.Public()), internal: httptest.NewServer(srv.Internal())}
	t.Cleanup(h.public.Close)
	t.Cleanup(h.internal.Close)
	return h
}

// merchant creates a merchant with a key holding scopes, and returns the key.
func (h *harness) merchant(id string, scopes ...string) string {
	h.t.Helper()
	if len(scopes) == 0 {
		scopes = []string{admin.ScopeRead, admin.ScopeWrite}
	}
	key, err := merchants.NewKeyIssuer(h.store.APIKeys, "sandbox", admin.DefaultVersion).Issue(context.Background(), id, scopes)
	if err != nil {
		h.t.Fatal(err)
	}
	return key
}

// response is a decoded answer.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r response) JSON(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("answer is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

// request is one call to the API.
type request struct {
	Method, Path string
	Key          string // Authorization: Bearer
	Body         any    // encoded as JSON unless []byte or string
	Header       map[string]string
}

// do sends req to the public listener. A POST gets a fresh Idempotency-Key
// unless the test sets one (or sets it to omitHeader to send none).
func (h *harness) do(req request) response {
	h.t.Helper()
	return h.send(h.public.URL, req)
}

// doInternal sends req to the internal listener with the ingest token.
func (h *harness) doInternal(req request) response {
	h.t.Helper()
	if req.Header == nil {
		req.Header = map[string]string{}
	}
	if _, ok := req.Header["Authorization"]; !ok {
		req.Header["Authorization"] = "Bearer " + testIngestToken
	}
	req.Header["Idempotency-Key"] = omitHeader
	return h.send(h.internal.URL, req)
}

func (h *harness) send(base string, req request) response {
	h.t.Helper()
	var body io.Reader
	switch b := req.Body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	case string:
		body = bytes.NewReader([]byte(b))
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		body = bytes.NewReader(j)
	}
	r, err := http.NewRequest(req.Method, base+req.Path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if req.Key != "" {
		r.Header.Set("Authorization", "Bearer "+req.Key)
	}
	if req.Method == http.MethodPost {
		r.Header.Set("Idempotency-Key", uuid.NewString())
	}
	for k, v := range req.Header {
		if v == omitHeader {
			r.Header.Del(k)
			continue
		}
		r.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(r)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	out := response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if base == h.public.URL {
		validateExchange(h.t, r, nil, out) // the OpenAPI document must describe every public exchange
	}
	return out
}

// expectError checks an answer is the spec 7 error with status and code,
// with every field present and the Correlation-Id header matching.
func expectError(t *testing.T, r response, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d; body %s", r.Status, status, r.Body)
	}
	m := r.JSON(t)
	for _, f := range []string{"category", "code", "message", "param", "doc_url", "correlation_id"} {
		if _, ok := m[f]; !ok {
			t.Errorf("error body lacks %q: %s", f, r.Body)
		}
	}
	if m["code"] != code {
		t.Fatalf("code = %v, want %s; body %s", m["code"], code, r.Body)
	}
	if cid := r.Header.Get("Correlation-Id"); cid == "" || cid != m["correlation_id"] {
		t.Errorf("Correlation-Id header %q != body correlation_id %v", cid, m["correlation_id"])
	}
	return m
}

// usePipeline hands d's pieces to admin as cmd/webhookd does: the
// publisher, redeliverer and dropper as its Publisher, the checker as its
// Checker.
func usePipeline(cfg *admin.Config, d *dispatcher.Dispatcher) {
	cfg.Publisher = struct {
		*publish.Publisher
		*publish.Redeliverer
		*deliver.Dropper
	}{d.Publisher, d.Redeliverer, d.Dropper}
	cfg.Checker = d.Checker
	if d.Poller != nil {
		cfg.Poller = d.Poller
	}
}
