package main

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/testpki"
)

// Issue 38, "A hostile merchant gets nothing": one table, every
// subscription kind and authentication mode as rows, each row one hostile
// shape a merchant with a write key can send, tried against the real
// binary (one `api`, two `worker`s) configured as a default build is: no
// plaintext targets (https only, amqps only, Kafka over TLS), private
// addresses allowed only so that the test's own servers on 127.0.0.1 can
// be reached. Every server of the test speaks TLS under a CA the engine
// trusts through SSL_CERT_FILE, as an operator's system roots would.
//
// For every row: a shape that can be refused is refused at create with a
// 4xx in the spec's format naming the field; a shape that can only show
// itself at delivery (an endless answer, a hanging token endpoint, a
// broker that is not there) is accepted and fails its attempts with a
// code, and what the merchant then reads names no internal address, path
// or library text. Throughout, while every accepted shape runs at once:
// the engine stays up, no worker grows past hostileMaxRSS, and a calm
// merchant's publish → arrival p99 stays within twice its p99 alone (and
// a second, for a busy machine's noise; holdsBeside).

// hostileMerchant is the merchant who tries every shape.
const hostileMerchant = "m_hostile"

// hostileMaxRSS bounds each worker's resident memory while the hostile
// shapes run. A worker of this test holds 16 attempts at once; every
// outbound read is bounded (a response body, a token answer, a queue's
// answer at most a few MiB), so that 16 of them stay far below it, while
// one read of /dev/zero or of an endless answer would pass it in a second.
const hostileMaxRSS = 256 << 20

// The per-merchant bounds the engine is started with (defaults spelt out,
// so that the test says what it holds the engine to).
const (
	hostileLongPolls = 4
	hostileListeners = 3
	// hostileFloods is how many concurrent long polls, listeners or
	// session mints the hostile merchant tries: several times the bounds.
	hostileFloods = 12
	// portalSessionsPerKey is how many portal sessions one key mints in a
	// burst (WEBHOOKD_PORTAL_SESSION_RATE).
	portalSessionsPerKey = 5
)

// forbiddenInMerchantText is what no text a merchant reads may hold: the
// engine's files and paths, raw network-stack and TLS-library text, the
// resolver, and the test's own backing services.
var forbiddenInMerchantText = []string{
	"/dev/", "/etc/", "/proc/", "no such file", "permission denied",
	"dial tcp", "lookup ", "127.0.0.53", "i/o timeout", "x509:", "tls: ", "proxyconnect",
	"read tcp", "write tcp", "connect: ", ":5432", "webhookd-redis-", "context deadline exceeded", "EOF",
}

//go:embed testdata/hostile/rsa8192.key
var rsa8192Key string

//go:embed testdata/hostile/rsa8192.crt
var rsa8192Cert string

// hostileRow is one hostile shape of one kind.
type hostileRow struct {
	kind, shape string
	// body is the subscription's create body (the test's servers
	// started); nil for a row that is not a subscription (flood).
	body func(s *hostileServers) map[string]any
	// refusedParam, when set, is the field a create must be refused on.
	refusedParam string
	// failsWith, for an accepted row, are the attempt error codes its
	// attempts may end with (any of them).
	failsWith []string
	// flood, for a row of reads, runs it and returns what it saw.
	flood func(t *testing.T, e *engine, key string, s *hostileServers) floodResult
}

// floodResult is what a flood of one kind of request got.
type floodResult struct {
	accepted, refused int
	// bound is how many the engine should accept at most.
	bound int
	// refusals are the bodies of the refusals (spec format checked).
	refusals []map[string]any
	// retryAfter is whether every refusal carried a Retry-After.
	retryAfter bool
}

// transformed is a subscription to the calm merchant's receiver whose
// transformation is code: its deliveries never reach it when the code
// fails.
func transformed(s *hostileServers, code string) map[string]any {
	return map[string]any{"url": s.calm.URL + "/shaped", "events": []string{"*"},
		"transformation": map[string]any{"code": code}}
}

func hostileRows() []hostileRow {
	amqps := func(s *hostileServers, query string) map[string]any {
		return map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "rabbitmq",
			"url": "amqps://guest:guest@127.0.0.1:" + s.closedPort + "/" + query, "exchange": "webhooks"}}
	}
	webhook := func(url string, auth map[string]any) map[string]any {
		b := map[string]any{"url": url, "events": []string{"*"}}
		if auth != nil {
			b["authentication"] = auth
		}
		return b
	}
	oauth2 := func(s *hostileServers, tokenURL string) map[string]any {
		return webhook(s.calm.URL+"/oauth", map[string]any{"type": "oauth2_client_credentials", "token_url": tokenURL,
			"client_id": "hostile", "client_secret": "hostile-secret"})
	}
	return []hostileRow{
		// Options smuggled into addresses: nothing merchant-written reaches
		// a library that would interpret it further.
		{kind: "rabbitmq", shape: "cacertfile=/dev/zero in the URL", refusedParam: "destination.url",
			body: func(s *hostileServers) map[string]any { return amqps(s, "?cacertfile=/dev/zero") }},
		{kind: "rabbitmq", shape: "certfile and keyfile from the engine's disk", refusedParam: "destination.url",
			body: func(s *hostileServers) map[string]any {
				return amqps(s, "vhost?certfile=/etc/ssl/private/server.pem&keyfile=/etc/ssl/private/server.key")
			}},
		{kind: "rabbitmq", shape: "auth_mechanism and server_name_indication", refusedParam: "destination.url",
			body: func(s *hostileServers) map[string]any {
				return amqps(s, "?auth_mechanism=EXTERNAL&server_name_indication=internal.example")
			}},
		{kind: "rabbitmq", shape: "plaintext amqp://", refusedParam: "destination.url",
			body: func(s *hostileServers) map[string]any {
				return map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "rabbitmq",
					"url": "amqp://guest:guest@127.0.0.1:5672/", "exchange": "webhooks"}}
			}},
		{kind: "kafka", shape: "plaintext (no TLS) with SASL credentials", refusedParam: "destination.tls",
			body: func(s *hostileServers) map[string]any {
				return map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "kafka",
					"brokers": []string{"127.0.0.1:" + s.closedPort}, "topic": "webhooks",
					"sasl": map[string]any{"mechanism": "plain", "username": "u", "password": "p"}}}
			}},
		{kind: "gcp_pubsub", shape: "plaintext emulator endpoint", refusedParam: "destination.endpoint",
			body: func(s *hostileServers) map[string]any {
				return map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "gcp_pubsub",
					"project_id": "hostile-project", "topic_id": "webhooks", "endpoint": "127.0.0.1:" + s.closedPort}}
			}},
		{kind: "gcp_pubsub", shape: "external_account credentials reading a file", refusedParam: "destination.credentials_json",
			body: func(s *hostileServers) map[string]any {
				creds := `{"type":"external_account","audience":"//iam.googleapis.com/x","subject_token_type":"urn:ietf:params:oauth:token-type:jwt",` +
					`"token_url":"https://sts.googleapis.com/v1/token","credential_source":{"file":"/etc/hostname"}}`
				return map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "gcp_pubsub",
					"project_id": "hostile-project", "topic_id": "webhooks", "credentials_json": creds}}
			}},
		{kind: "webhook", shape: "a file: URL", refusedParam: "url",
			body: func(s *hostileServers) map[string]any { return webhook("file:///etc/passwd", nil) }},
		// Oversized keys and chains: a 8,192-bit RSA key costs seconds of
		// CPU per handshake or token.
		// The certificate carries the key's public half: it is refused
		// first, on its own field.
		{kind: "webhook + mtls", shape: "an 8,192-bit RSA client key", refusedParam: "authentication.client_certificate",
			body: func(s *hostileServers) map[string]any {
				return webhook(s.calm.URL+"/mtls", map[string]any{"type": "mtls", "client_certificate": rsa8192Cert, "client_key": rsa8192Key})
			}},
		{kind: "webhook + mtls", shape: "a chain of 12 certificates", refusedParam: "authentication.client_certificate",
			body: func(s *hostileServers) map[string]any {
				return webhook(s.calm.URL+"/mtls", map[string]any{"type": "mtls",
					"client_certificate": s.client.CertPEM + strings.Repeat(s.ca.PEM, 11), "client_key": s.client.KeyPEM})
			}},
		{kind: "webhook + oauth2 private_key_jwt", shape: "an 8,192-bit RSA signing key", refusedParam: "authentication.private_key",
			body: func(s *hostileServers) map[string]any {
				return webhook(s.calm.URL+"/jwt", map[string]any{"type": "oauth2_client_credentials", "token_url": s.hangs.URL + "/token",
					"client_id": "hostile", "private_key": rsa8192Key})
			}},
		{kind: "webhook + encryption", shape: "an 8,192-bit RSA public key", refusedParam: "encryption.public_key",
			body: func(s *hostileServers) map[string]any {
				return map[string]any{"url": s.calm.URL + "/jwe", "events": []string{"*"},
					"encryption": map[string]any{"public_key": rsaPublicJWK(rsa8192Key)}}
			}},
		// Endless or huge answers, hanging endpoints: accepted, each read
		// bounded, each attempt failed with its code.
		{kind: "webhook", shape: "an endless answer", failsWith: []string{"http_status"},
			body: func(s *hostileServers) map[string]any { return webhook(s.endless.URL+"/hook", nil) }},
		{kind: "webhook + oauth2 client_secret", shape: "a token endpoint that hangs", failsWith: []string{"oauth_token", "timeout"},
			body: func(s *hostileServers) map[string]any { return oauth2(s, s.hangs.URL+"/token") }},
		{kind: "webhook + oauth2 client_secret", shape: "a token endpoint with an endless answer", failsWith: []string{"oauth_token", "response_too_large"},
			body: func(s *hostileServers) map[string]any { return oauth2(s, s.endless.URL+"/token") }},
		{kind: "sqs", shape: "a custom endpoint with an endless answer", failsWith: []string{"response_too_large", "broker_refused", "broker_unreachable", "not_confirmed"},
			body: func(s *hostileServers) map[string]any {
				return map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "sqs",
					"queue_url": s.endless.URL + "/123456789012/webhooks", "endpoint": s.endless.URL, "region": "eu-west-1",
					"access_key_id": "AKIAHOSTILE", "secret_access_key": "hostile-secret-access-key"}}
			}},
		{kind: "rabbitmq", shape: "amqps to an address where no broker is", failsWith: []string{"broker_unreachable"},
			body: func(s *hostileServers) map[string]any { return amqps(s, "") }},
		{kind: "kafka", shape: "TLS to an address where no broker is", failsWith: []string{"broker_unreachable", "not_confirmed"},
			body: func(s *hostileServers) map[string]any {
				return map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "kafka",
					"brokers": []string{"127.0.0.1:" + s.closedPort}, "topic": "webhooks", "tls": true}}
			}},
		// Transformations (issue 40): a script that would run forever at
		// its top level is refused when saved; one that spins, or
		// allocates without end, in its handler is accepted (it shows
		// itself only when it runs) and every attempt fails with
		// transformation_error, its memory and CPU bounded, one core of
		// a worker at most.
		{kind: "webhook + transformation", shape: "a top level that never ends", refusedParam: "transformation.code",
			body: func(s *hostileServers) map[string]any {
				return transformed(s, "for (;;) {}\nfunction handler(w) { return w }")
			}},
		{kind: "webhook + transformation", shape: "a handler that never ends", failsWith: []string{"transformation_error"},
			body: func(s *hostileServers) map[string]any { return transformed(s, "function handler(w) { for (;;) {} }") }},
		{kind: "webhook + transformation", shape: "'x'.repeat(2**30)", failsWith: []string{"transformation_error"},
			body: func(s *hostileServers) map[string]any {
				return transformed(s, "function handler(w) { w.payload = {x: 'x'.repeat(2**30)}; return w }")
			}},
		{kind: "webhook + transformation", shape: "arrays grown in a loop", failsWith: []string{"transformation_error"},
			body: func(s *hostileServers) map[string]any {
				return transformed(s, "function handler(w) { const a = []; for (;;) { a.push(new Array(1e5).fill(1)) } }")
			}},
		// Many long polls, listeners and sessions: each bounded per merchant.
		{kind: "poll", shape: "many concurrent long polls", flood: floodLongPolls},
		{kind: "listen", shape: "many concurrent listeners", flood: floodListeners},
		{kind: "portal", shape: "many sessions from one key", flood: floodSessions},
	}
}

// rsaPublicJWK is the public JWK of the RSA key in keyPEM (PKCS #8).
func rsaPublicJWK(keyPEM string) map[string]any {
	block, _ := pem.Decode([]byte(keyPEM))
	if block == nil {
		panic("rsaPublicJWK: no PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		panic(err)
	}
	pub := key.(*rsa.PrivateKey).PublicKey
	return map[string]any{"kty": "RSA", "alg": "RSA-OAEP-256", "use": "enc",
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes())}
}

// hostileServers are the test's servers, every one over TLS under ca.
type hostileServers struct {
	ca     *testpki.CA
	client testpki.Issued
	// calm is the calm merchant's receiver (arrivals), endless answers
	// without end, hangs never answers; closedPort is a port where nothing
	// listens.
	calm       *arrivals
	endless    *httptest.Server
	hangs      *httptest.Server
	closedPort string
	// pollID is the hostile merchant's poll subscription.
	pollID string
}

func TestHostileMerchant(t *testing.T) {
	storetest.FullLane(t, "issue 38's hostile-merchant suite runs the real binary")
	s := startHostileServers(t)
	roots := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(roots, []byte(s.ca.PEM), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, "WEBHOOKD_ALLOW_HTTP_TARGETS=false", "SSL_CERT_FILE="+roots,
		"WEBHOOKD_WORKER_CONCURRENCY=16", "WEBHOOKD_DELIVERY_TIMEOUT=2s", "WEBHOOKD_RETRY_SCHEDULE=1s,1s,1s",
		"WEBHOOKD_MAX_LONG_POLLS_PER_MERCHANT="+strconv.Itoa(hostileLongPolls),
		"WEBHOOKD_MAX_LISTENERS_PER_MERCHANT="+strconv.Itoa(hostileListeners),
		"WEBHOOKD_PORTAL_SESSION_RATE="+strconv.Itoa(portalSessionsPerKey)+"/m",
		"WEBHOOKD_LOG_LEVEL=warn")
	procs := []*process{e.spawn("api", e.internal), e.spawn("worker", storetest.FreeAddr(t)), e.spawn("worker", storetest.FreeAddr(t))}
	e.subscribeURL(e.merchantKey("m_calm"), s.calm.URL+"/hook")
	hostileKey := e.merchantKey(hostileMerchant)

	solo := s.calm.probe(e, "alone")

	// Every accepted shape runs at once, published to at 10 events/s,
	// while the floods are tried and the calm merchant is measured again.
	s.pollID = e.createSubscription(hostileKey, map[string]any{"events": []string{"payout.failed"}, "destination": map[string]any{"type": "poll"}})
	accepted := map[string]hostileRow{}
	for _, row := range hostileRows() {
		if row.body == nil {
			continue
		}
		t.Run("create/"+row.kind+"/"+row.shape, func(t *testing.T) {
			status, out := e.call(http.MethodPost, "http://"+e.public+"/v1/webhook_subscriptions", hostileKey, row.body(s))
			checkMerchantText(t, out)
			if row.refusedParam == "" {
				if status != http.StatusCreated {
					t.Fatalf("create: %d %v, want 201 (the shape shows itself only at delivery)", status, out)
				}
				accepted[out["id"].(string)] = row
				return
			}
			checkRefusal(t, status, out, http.StatusBadRequest, row.refusedParam)
		})
	}
	stopHostile := e.steadyLoad(hostileMerchant, 10)
	defer stopHostile()
	peak := watchRSS(t, procs[1:])

	floods := map[string]floodResult{}
	var floodsDone sync.WaitGroup
	var floodsMu sync.Mutex
	for _, row := range hostileRows() {
		if row.flood == nil {
			continue
		}
		floodsDone.Go(func() {
			got := row.flood(t, e, hostileKey, s)
			floodsMu.Lock()
			floods[row.kind+"/"+row.shape] = got
			floodsMu.Unlock()
		})
	}
	beside := s.calm.probe(e, "beside every hostile shape")
	floodsDone.Wait()
	n := stopHostile()
	t.Logf("the hostile merchant published %d events to %d accepted shapes", n, len(accepted))

	t.Run("the calm merchant keeps its latency", func(t *testing.T) {
		holdsBeside(t, solo, beside, "the calm merchant beside a hostile one")
	})
	t.Run("no worker outgrows its bound", func(t *testing.T) {
		for i, p := range peak() {
			t.Logf("worker %d: peak RSS %d MiB", i+1, p>>20)
			if p > hostileMaxRSS {
				t.Errorf("worker %d reached %d MiB, over %d MiB", i+1, p>>20, hostileMaxRSS>>20)
			}
		}
	})
	t.Run("the engine stays up", func(t *testing.T) {
		for _, p := range procs {
			if !p.ready() {
				t.Errorf("webhookd %s is not ready after the hostile shapes; logs:\n%s", p.cmd.Args[1], p.logs)
			}
		}
	})
	for id, row := range accepted {
		t.Run("attempts/"+row.kind+"/"+row.shape, func(t *testing.T) {
			checkHostileAttempts(t, e, hostileKey, id, row)
		})
	}
	for _, row := range hostileRows() {
		if row.flood == nil {
			continue
		}
		t.Run("flood/"+row.kind+"/"+row.shape, func(t *testing.T) {
			got := floods[row.kind+"/"+row.shape]
			t.Logf("%d accepted, %d refused (bound %d)", got.accepted, got.refused, got.bound)
			if got.accepted > got.bound || got.refused == 0 || got.accepted+got.refused != hostileFloods {
				t.Fatalf("%d of %d accepted and %d refused; want at most %d accepted and the rest refused",
					got.accepted, hostileFloods, got.refused, got.bound)
			}
			if !got.retryAfter {
				t.Errorf("a refusal had no Retry-After")
			}
			for _, body := range got.refusals {
				checkMerchantText(t, body)
				if body["category"] != "rate_limit_error" || body["code"] == nil || body["message"] == nil {
					t.Errorf("refusal %v is not a 429 in the spec's format", body)
				}
			}
		})
	}
	t.Run("long polls share one Redis connection", func(t *testing.T) {
		// The API process keeps one pub/sub connection for every long
		// poll it holds, whatever their number: the connections that
		// hold a subscription are as many during the polls as before
		// them, and one more at most (the first poll's).
		rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: e.redis.Socket})
		defer rdb.Close()
		before := subscribedClients(t, rdb)
		stop := holdLongPolls(t, e, rdb, hostileKey, s, hostileLongPolls)
		during, listening := subscribedClients(t, rdb), pollListeners(t, rdb, s.pollID)
		stop()
		if listening != 1 {
			t.Errorf("%d Redis connections subscribed to the subscription's channel for %d long polls, want one", listening, hostileLongPolls)
		}
		if during > before+1 {
			t.Fatalf("%d Redis connections held a subscription before %d long polls and %d during them: more than one more",
				before, hostileLongPolls, during)
		}
	})
}

// pollListeners is how many Redis connections listen on the poll
// subscription's channel.
func pollListeners(t *testing.T, rdb *redis.Client, subscriptionID string) int64 {
	t.Helper()
	channel := queue.PollChannel(uuid.MustParse(subscriptionID))
	counts, err := rdb.PubSubNumSub(context.Background(), channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return counts[channel]
}

// subscribedClients counts the Redis connections that hold a pub/sub
// subscription (CLIENT LIST's sub or psub above 0).
func subscribedClients(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	list, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(list, "\n") {
		for _, field := range strings.Fields(line) {
			if k, v, _ := strings.Cut(field, "="); (k == "sub" || k == "psub" || k == "ssub") && v != "0" {
				n++
				break
			}
		}
	}
	return n
}

// startHostileServers starts the test's TLS servers.
func startHostileServers(t *testing.T) *hostileServers {
	t.Helper()
	ca := testpki.NewCA(t, "hostile suite CA")
	cert := ca.Server(t).TLS(t)
	tlsServer := func(h http.Handler) *httptest.Server {
		srv := httptest.NewUnstartedServer(h)
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	s := &hostileServers{ca: ca, client: ca.ValidClient(t, "hostile-client")}
	s.calm = newTLSArrivals(t, cert)
	// endless answers with a body that never ends, until the engine hangs
	// up: 200 to a token or queue request, 500 to a delivery (/hook), so
	// that the attempt fails and is tried again.
	s.endless = tlsServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		status := http.StatusOK
		if r.URL.Path == "/hook" {
			status = http.StatusInternalServerError
		}
		w.WriteHeader(status)
		chunk := []byte(`{"a":"` + strings.Repeat("x", 64<<10))
		for {
			select {
			case <-r.Context().Done():
				return
			case <-done:
				return
			default:
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	s.hangs = tlsServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, s.closedPort, _ = net.SplitHostPort(l.Addr().String())
	l.Close()
	return s
}

// newTLSArrivals is arrivals over TLS with cert.
func newTLSArrivals(t *testing.T, cert tls.Certificate) *arrivals {
	a := &arrivals{at: map[string]time.Time{}}
	a.Server = httptest.NewUnstartedServer(a.handler())
	a.Server.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	a.StartTLS()
	t.Cleanup(a.Close)
	return a
}

// checkRefusal fails the test unless a create was answered status in the
// spec's format, naming param.
func checkRefusal(t *testing.T, status int, out map[string]any, want int, param string) {
	t.Helper()
	if status != want || out["param"] != param || out["category"] != "invalid_request_error" ||
		out["code"] == nil || out["message"] == nil || out["doc_url"] == nil {
		t.Fatalf("answered %d %v; want %d in the spec's format naming %s", status, out, want, param)
	}
}

// checkMerchantText fails the test when any string in v (a decoded JSON
// answer) holds what a merchant may not read.
func checkMerchantText(t *testing.T, v any) {
	t.Helper()
	switch v := v.(type) {
	case string:
		for _, bad := range forbiddenInMerchantText {
			if strings.Contains(v, bad) {
				t.Errorf("a merchant reads %q, which holds %q", v, bad)
			}
		}
	case map[string]any:
		for _, x := range v {
			checkMerchantText(t, x)
		}
	case []any:
		for _, x := range v {
			checkMerchantText(t, x)
		}
	}
}

// checkHostileAttempts reads the deliveries of the hostile merchant's
// subscription id (row's): some attempt was made, each ended with one of
// row's codes, and nothing in them names an internal address or path.
func checkHostileAttempts(t *testing.T, e *engine, key, id string, row hostileRow) {
	t.Helper()
	var attempts []map[string]any
	waitFor(t, "attempts of "+row.kind+" / "+row.shape, 30*time.Second, func() bool {
		attempts = nil
		status, list := e.call(http.MethodGet, "http://"+e.public+"/v1/webhook_deliveries?limit=20&subscription_id="+id, key, nil)
		if status != http.StatusOK {
			return false
		}
		checkMerchantText(t, list)
		for _, d := range list["data"].([]any) {
			for _, a := range d.(map[string]any)["attempts"].([]any) {
				attempts = append(attempts, a.(map[string]any))
			}
		}
		return len(attempts) > 0
	})
	for _, a := range attempts {
		if code, _ := a["error"].(string); !slices.Contains(row.failsWith, code) {
			t.Errorf("attempt ended with error %q (response_body %.200q); want one of %v", code, a["response_body"], row.failsWith)
		}
	}
}

// createSubscription creates a subscription of key's merchant from body
// and returns its id.
func (e *engine) createSubscription(key string, body map[string]any) string {
	e.t.Helper()
	status, sub := e.call(http.MethodPost, "http://"+e.public+"/v1/webhook_subscriptions", key, body)
	if status != http.StatusCreated {
		e.t.Fatalf("create subscription %v: %d %v", body, status, sub)
	}
	return sub["id"].(string)
}

// watchRSS samples the processes' resident memory every 100 ms until the
// test ends; peak returns each one's highest so far.
func watchRSS(t *testing.T, procs []*process) (peak func() []int) {
	peaks := make([]atomic.Int64, len(procs))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for i, p := range procs {
				if rss := int64(rssOf(p.cmd.Process.Pid)); rss > peaks[i].Load() {
					peaks[i].Store(rss)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() []int {
		out := make([]int, len(procs))
		for i := range peaks {
			out[i] = int(peaks[i].Load())
		}
		return out
	}
}

// floodLongPolls opens hostileFloods long polls (wait=5) of the poll
// subscription at once: it takes only events the hostile merchant never
// publishes, so that every read waits.
func floodLongPolls(_ *testing.T, e *engine, key string, s *hostileServers) floodResult {
	id := s.pollID
	return flood(hostileLongPolls, func() (int, http.Header, map[string]any, error) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+e.public+"/v1/webhook_subscriptions/"+id+"/poll?wait=5", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		return doJSON(req)
	})
}

// holdLongPolls starts n long polls (wait=30) of the poll subscription
// and waits until the engine counts them waiting; stop ends them.
func holdLongPolls(t *testing.T, e *engine, rdb *redis.Client, key string, s *hostileServers, n int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a failed wait below leaves no poll behind
	var done sync.WaitGroup
	for range n {
		done.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.public+"/v1/webhook_subscriptions/"+s.pollID+"/poll?wait=30", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	// Each poll takes its place in the merchant's count before it waits.
	waitFor(t, fmt.Sprintf("%d long polls to wait", n), 10*time.Second, func() bool {
		held, err := rdb.ZCard(context.Background(), "webhookd:held:long_poll:"+hostileMerchant).Result()
		return err == nil && held >= int64(n) && pollListeners(t, rdb, s.pollID) > 0
	})
	return func() { cancel(); done.Wait() }
}

// doJSON sends req and decodes its answer.
func doJSON(req *http.Request) (int, http.Header, map[string]any, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, resp.Header, body, nil
}

// floodListeners opens hostileFloods listen WebSockets at once and keeps
// the accepted ones open until every one was answered.
func floodListeners(_ *testing.T, e *engine, key string, _ *hostileServers) floodResult {
	var mu sync.Mutex
	var open []*websocket.Conn
	defer func() {
		for _, c := range open {
			c.CloseNow()
		}
	}()
	return flood(hostileListeners, func() (int, http.Header, map[string]any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, resp, err := websocket.Dial(ctx, "ws://"+e.public+"/v1/listen", &websocket.DialOptions{
			HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
		if err == nil {
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			return http.StatusSwitchingProtocols, nil, nil, nil
		}
		if resp == nil {
			return 0, nil, nil, err
		}
		var body map[string]any
		if resp.Body != nil {
			_ = json.NewDecoder(resp.Body).Decode(&body)
		}
		return resp.StatusCode, resp.Header, body, nil
	})
}

// floodSessions mints hostileFloods portal sessions with one key.
func floodSessions(_ *testing.T, e *engine, key string, _ *hostileServers) floodResult {
	return flood(portalSessionsPerKey, func() (int, http.Header, map[string]any, error) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+e.public+"/v1/portal_sessions", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("mint-%d", time.Now().UnixNano()))
		return doJSON(req)
	})
}

// flood makes hostileFloods requests with do at once and sorts their
// answers: 2xx (or 101) accepted, 429 refused; anything else is counted
// as neither, which floods' checks then refuse.
func flood(bound int, do func() (int, http.Header, map[string]any, error)) floodResult {
	res := floodResult{bound: bound, retryAfter: true}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range hostileFloods {
		wg.Go(func() {
			status, h, body, err := do()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && status/100 == 2 || status == http.StatusSwitchingProtocols:
				res.accepted++
			case err == nil && status == http.StatusTooManyRequests:
				res.refused++
				res.refusals = append(res.refusals, body)
				if h.Get("Retry-After") == "" {
					res.retryAfter = false
				}
			}
		})
	}
	wg.Wait()
	return res
}
