package s3_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/destination/s3"
	"github.com/webhookd/webhookd/internal/invalid"
)

const (
	testBucket = "webhooks"
	testRegion = "eu-west-1"
	testKeyID  = "AKIAWEBHOOKDTEST"
	testSecret = "test-secret-access-key"
)

// fakeS3 is gofakes3 (its in-memory backend) served by an httptest
// server on 127.0.0.1, behind a handler that checks every request is
// signed with SigV4 by the configured access key id: gofakes3 checks no
// signature, so without this gate a publisher that signed nothing
// would pass. The backend outlives the server, so that objects outlive
// an outage.
type fakeS3 struct {
	backend *s3mem.Backend
	handler http.Handler
	addr    string
	// puts counts the PutObject requests that reached the gate, signed
	// or not; unsigned those the gate refused.
	puts, unsigned atomic.Int64
	// lastAuth is the Authorization header of the last PutObject.
	lastAuth atomic.Value

	mu   sync.Mutex
	srv  *httptest.Server
	seen map[string]bool
}

// signedBy is the start of an Authorization header of SigV4 by the test
// key, for S3 in the test region.
var signedBy = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=` + testKeyID + `/[0-9]{8}/` + testRegion + `/s3/aws4_request, SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$`)

func newFakeS3(t *testing.T) *fakeS3 {
	t.Helper()
	f := &fakeS3{backend: s3mem.New(), seen: map[string]bool{}}
	if err := f.backend.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	faker := gofakes3.New(f.backend).Server()
	f.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if r.Method == http.MethodPut {
			f.puts.Add(1)
			f.lastAuth.Store(auth)
		}
		if !signedBy.MatchString(auth) {
			if r.Method == http.MethodPut {
				f.unsigned.Add(1)
			}
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
			return
		}
		faker.ServeHTTP(w, r)
	})
	f.srv = httptest.NewServer(f.handler)
	f.addr = f.srv.Listener.Addr().String()
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.srv.Close()
	})
	return f
}

// url is the server's, the same across an outage.
func (f *fakeS3) url() string { return "http://" + f.addr }

// config is a destination object reaching the fake server, extra
// members added to it.
func (f *fakeS3) config(extra string) string {
	return fmt.Sprintf(`{"type": "s3", "bucket": %q, "region": %q, "access_key_id": %q, "secret_access_key": %q, "endpoint": %q%s}`,
		testBucket, testRegion, testKeyID, testSecret, f.url(), extra)
}

// down stops the server (its listener and connections) and returns what
// starts a new one on the same address, on the same backend.
func (f *fakeS3) down(t testing.TB) func() {
	f.mu.Lock()
	old := f.srv
	f.mu.Unlock()
	old.Close()
	return func() {
		l, err := net.Listen("tcp", f.addr)
		if err != nil {
			t.Fatalf("listen again on the same address: %v", err)
		}
		srv := httptest.NewUnstartedServer(f.handler)
		_ = srv.Listener.Close()
		srv.Listener = l
		srv.Start()
		f.mu.Lock()
		f.srv = srv
		f.mu.Unlock()
	}
}

// consumer is a client reading the bucket as a merchant's consumer
// would.
func (f *fakeS3) consumer() *s3sdk.Client {
	return s3sdk.New(s3sdk.Options{
		Region:       testRegion,
		Credentials:  credentials.NewStaticCredentialsProvider(testKeyID, testSecret, ""),
		BaseEndpoint: aws.String(f.url()),
		UsePathStyle: true,
		Retryer:      aws.NopRetryer{},
	})
}

// receive lists the bucket until an object it has not read yet is
// there, and reads it: its body, its user metadata as the headers
// (names lowercase) with its Content-Type, its key as Arrived.Key.
func (f *fakeS3) receive(ctx context.Context, t testing.TB) desttest.Arrived {
	t.Helper()
	client := f.consumer()
	for {
		if got, ok := f.next(ctx, t, client); ok {
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no new object in the bucket: %v", ctx.Err())
			return desttest.Arrived{}
		case <-time.After(50 * time.Millisecond): // the pace of a consumer's listing
		}
	}
}

func (f *fakeS3) next(ctx context.Context, t testing.TB, client *s3sdk.Client) (desttest.Arrived, bool) {
	t.Helper()
	keys, err := f.keys(ctx, client)
	if err != nil {
		return desttest.Arrived{}, false // the server may be down yet
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, key := range keys {
		if f.seen[key] {
			continue
		}
		obj, err := client.GetObject(ctx, &s3sdk.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("get object: %v", err)
		}
		body, err := io.ReadAll(obj.Body)
		_ = obj.Body.Close()
		if err != nil {
			t.Fatalf("read object: %v", err)
		}
		f.seen[key] = true
		headers := map[string]string{"content-type": aws.ToString(obj.ContentType)}
		for name, v := range obj.Metadata {
			headers[strings.ToLower(name)] = v
		}
		return desttest.Arrived{Body: body, Headers: headers, Key: key}, true
	}
	return desttest.Arrived{}, false
}

// keys are the bucket's keys, in order.
func (f *fakeS3) keys(ctx context.Context, client *s3sdk.Client) ([]string, error) {
	var keys []string
	pages := s3sdk.NewListObjectsV2Paginator(client, &s3sdk.ListObjectsV2Input{Bucket: aws.String(testBucket)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// unread is how many objects of the bucket receive has not read.
func (f *fakeS3) unread(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := f.keys(ctx, f.consumer())
	if err != nil {
		t.Fatalf("list the bucket: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, key := range keys {
		if !f.seen[key] {
			n++
		}
	}
	return n
}

func TestConformance(t *testing.T) {
	f := newFakeS3(t)
	desttest.Run(t, desttest.Case{
		Kind:    s3.New(),
		Config:  f.config(""),
		Receive: f.receive,
		// gofakes3 checks no signature: the gate in front of it checks
		// that requests are SigV4-signed by the configured key id
		// (TestSignedByTheAccessKey), not that the secret is right.
		WrongCredentials: "",
		Down:             f.down,
		Oversized: func(url string) string {
			return fmt.Sprintf(`{"type": "s3", "bucket": "webhooks", "region": "eu-west-1", "access_key_id": "k", "secret_access_key": "s", "endpoint": %q}`, url)
		},
		Hostile: hostile,
	})
}

// valid is a destination with every field right, for hostile rows to
// break one field of.
const valid = `"region": "eu-west-1", "access_key_id": "AKIA1", "secret_access_key": "s3cr3t"`

var hostile = []desttest.Hostile{
	{Name: "no bucket", Config: `{"type": "s3", ` + valid + `}`, Field: "destination.bucket"},
	{Name: "a bucket in uppercase", Config: `{"type": "s3", "bucket": "Acme-Hooks", ` + valid + `}`, Field: "destination.bucket", Secret: "Acme-Hooks"},
	{Name: "a bucket in the form of an IP address", Config: `{"type": "s3", "bucket": "192.168.10.7", ` + valid + `}`, Field: "destination.bucket", Secret: "192.168.10.7"},
	{Name: "a bucket with two dots in a row", Config: `{"type": "s3", "bucket": "acme..hooks", ` + valid + `}`, Field: "destination.bucket", Secret: "acme..hooks"},
	{Name: "a bucket of two characters", Config: `{"type": "s3", "bucket": "ab", ` + valid + `}`, Field: "destination.bucket"},
	{Name: "a bucket of 64 characters", Config: `{"type": "s3", "bucket": "` + strings.Repeat("a", 64) + `", ` + valid + `}`, Field: "destination.bucket"},
	{Name: "a bucket ending in a hyphen", Config: `{"type": "s3", "bucket": "acme-", ` + valid + `}`, Field: "destination.bucket"},
	{Name: "a bucket with a slash, naming a path", Config: `{"type": "s3", "bucket": "acme/../etc", ` + valid + `}`, Field: "destination.bucket", Secret: "../etc"},
	{Name: "a bucket with a control character", Config: `{"type": "s3", "bucket": "acme\nhooks", ` + valid + `}`, Field: "destination.bucket"},
	{Name: "a bucket name S3 reserves (access point alias)", Config: `{"type": "s3", "bucket": "acme-s3alias", ` + valid + `}`, Field: "destination.bucket"},
	{Name: "a bucket name S3 reserves (punycode prefix)", Config: `{"type": "s3", "bucket": "xn--acme", ` + valid + `}`, Field: "destination.bucket"},
	{Name: "a bucket of the wrong JSON type", Config: `{"type": "s3", "bucket": 42, ` + valid + `}`, Field: "destination.bucket"},
	{Name: "a key template with an unknown placeholder", Config: `{"type": "s3", "bucket": "acme", "key_template": "{secret_access_key}/{delivery_id}", ` + valid + `}`,
		Field: "destination.key_template", Secret: "secret_access_key"},
	{Name: "a key template with a brace left open", Config: `{"type": "s3", "bucket": "acme", "key_template": "{delivery_id", ` + valid + `}`, Field: "destination.key_template"},
	{Name: "a key template with a lone closing brace", Config: `{"type": "s3", "bucket": "acme", "key_template": "a}/{delivery_id}", ` + valid + `}`, Field: "destination.key_template"},
	{Name: "a key template climbing with ..", Config: `{"type": "s3", "bucket": "acme", "key_template": "hooks/../../etc/{delivery_id}", ` + valid + `}`,
		Field: "destination.key_template", Secret: "../../etc"},
	{Name: "a key template with a leading slash", Config: `{"type": "s3", "bucket": "acme", "key_template": "/etc/shadow/{delivery_id}", ` + valid + `}`,
		Field: "destination.key_template", Secret: "/etc/shadow"},
	{Name: "a key template with an empty segment", Config: `{"type": "s3", "bucket": "acme", "key_template": "hooks//{delivery_id}", ` + valid + `}`, Field: "destination.key_template"},
	{Name: "a key template with a . segment", Config: `{"type": "s3", "bucket": "acme", "key_template": "hooks/./{delivery_id}", ` + valid + `}`, Field: "destination.key_template"},
	{Name: "a key template with a control character", Config: `{"type": "s3", "bucket": "acme", "key_template": "hooks\u0000x/{delivery_id}", ` + valid + `}`,
		Field: "destination.key_template", Secret: "hooks\x00x"},
	{Name: "a key template with a space and a percent", Config: `{"type": "s3", "bucket": "acme", "key_template": "a b%2F/{delivery_id}", ` + valid + `}`, Field: "destination.key_template"},
	{Name: "a key template of 513 characters", Config: `{"type": "s3", "bucket": "acme", "key_template": "{delivery_id}` + strings.Repeat("a", 500) + `", ` + valid + `}`,
		Field: "destination.key_template"},
	{Name: "a key template naming neither the delivery nor the event", Config: `{"type": "s3", "bucket": "acme", "key_template": "{event_type}/{date}.json", ` + valid + `}`,
		Field: "destination.key_template"},
	{Name: "an empty key template set as a non-string", Config: `{"type": "s3", "bucket": "acme", "key_template": ["{delivery_id}"], ` + valid + `}`, Field: "destination.key_template"},
	{Name: "an endpoint with a query", Config: `{"type": "s3", "bucket": "acme", "endpoint": "https://s3.example.com/?x-id=/etc/passwd", ` + valid + `}`,
		Field: "destination.endpoint", Secret: "/etc/passwd"},
	{Name: "an endpoint with credentials", Config: `{"type": "s3", "bucket": "acme", "endpoint": "https://admin:hunter2@s3.example.com", ` + valid + `}`,
		Field: "destination.endpoint", Secret: "hunter2"},
	{Name: "an endpoint that is a file", Config: `{"type": "s3", "bucket": "acme", "endpoint": "file:///etc/passwd", ` + valid + `}`,
		Field: "destination.endpoint", Secret: "/etc/passwd"},
	{Name: "an unknown field (acl)", Config: `{"type": "s3", "bucket": "acme", "acl": "public-read-write", ` + valid + `}`, Field: "destination.acl", Secret: "public-read-write"},
	{Name: "no region", Config: `{"type": "s3", "bucket": "acme", "access_key_id": "AKIA1", "secret_access_key": "s3cr3t"}`, Field: "destination.region"},
	{Name: "a region that is a host", Config: `{"type": "s3", "bucket": "acme", "region": "evil.example.com", "access_key_id": "AKIA1", "secret_access_key": "s3cr3t"}`,
		Field: "destination.region", Secret: "evil.example.com"},
	{Name: "no secret access key", Config: `{"type": "s3", "bucket": "acme", "region": "eu-west-1", "access_key_id": "AKIA1"}`, Field: "destination.secret_access_key"},
	{Name: "an oversized access key id", Config: `{"type": "s3", "bucket": "acme", "region": "eu-west-1", "access_key_id": "` + strings.Repeat("A", 300) + `", "secret_access_key": "s"}`,
		Field: "destination.access_key_id"},
}

// TestParseAccepts: the shapes a merchant may set.
func TestParseAccepts(t *testing.T) {
	r, err := destination.NewRegistry(s3.New())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, raw, target string
	}{
		{"AWS's own endpoint, the default key template", `{"type": "s3", "bucket": "acme-hooks", ` + valid + `}`,
			"s3://acme-hooks/{event_type}/{date}/{delivery_id}.json (eu-west-1)"},
		{"a bucket with dots", `{"type": "s3", "bucket": "hooks.acme.example", ` + valid + `}`,
			"s3://hooks.acme.example/{event_type}/{date}/{delivery_id}.json (eu-west-1)"},
		{"every placeholder", `{"type": "s3", "bucket": "acme", "key_template": "in/{date}/{hour}/{event_type}-{event_id}_{delivery_id}.json", ` + valid + `}`,
			"s3://acme/in/{date}/{hour}/{event_type}-{event_id}_{delivery_id}.json (eu-west-1)"},
		{"the event id alone, for one object per event", `{"type": "s3", "bucket": "acme", "key_template": "{event_id}", ` + valid + `}`,
			"s3://acme/{event_id} (eu-west-1)"},
		{"a compatible server", `{"type": "s3", "bucket": "acme", "endpoint": "https://minio.example.com:9000", ` + valid + `}`,
			"s3://acme/{event_type}/{date}/{delivery_id}.json (https://minio.example.com:9000)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cfg, err := r.Parse("destination", json.RawMessage(tc.raw))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if got := cfg.Target(); got != tc.target {
				t.Errorf("target %q, want %q", got, tc.target)
			}
		})
	}
}

// TestConfigNeverPrintsTheSecret: every way a config is printed or
// logged masks the secret key.
func TestConfigNeverPrintsTheSecret(t *testing.T) {
	r, err := destination.NewRegistry(s3.New())
	if err != nil {
		t.Fatal(err)
	}
	_, cfg2, err := r.Parse("destination", json.RawMessage(`{"type": "s3", "bucket": "acme", "region": "eu-west-1", "access_key_id": "AKIA1", "secret_access_key": "wJalrXUtnFEMI"}`))
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("opened", "destination", cfg2)
	for _, text := range []string{fmt.Sprint(cfg2), fmt.Sprintf("%+v", cfg2), fmt.Sprintf("%#v", cfg2), fmt.Sprintf("%s", cfg2), cfg2.Target(), logged.String()} {
		if strings.Contains(text, "wJalrXUtnFEMI") {
			t.Errorf("the secret key is printed: %s", text)
		}
	}
	if !strings.Contains(logged.String(), `"bucket":"acme"`) {
		t.Errorf("the log %s lacks the bucket", logged.String())
	}
}

// message is a message of one delivery, as the engine makes it.
func message(id string, headers map[string]string) destination.Message {
	h := map[string]string{"webhook-id": "msg_" + id, "webhook-timestamp": "1700000000", "webhook-signature": "v1,c2lnbmF0dXJl",
		"content-type": "application/json", "user-agent": "webhookd/test"}
	for k, v := range headers {
		h[k] = v
	}
	return destination.Message{DeliveryID: "dlv_" + id, EventID: "evt_" + id, EventType: "payout.paid", Body: []byte(`{"id":"evt_` + id + `"}`),
		ContentType: "application/json", Headers: h, SignedAt: time.Date(2025, 3, 9, 23, 30, 0, 0, time.UTC), Size: 1}
}

func open(t *testing.T, raw string) destination.Publisher {
	t.Helper()
	r, err := destination.NewRegistry(s3.New())
	if err != nil {
		t.Fatal(err)
	}
	_, cfg, err := r.Parse("destination", json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Open("s3", cfg, destination.Env{Dial: (&net.Dialer{}).DialContext, Timeout: 5 * time.Second, Clock: clock.Or(nil), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func send(t *testing.T, p destination.Publisher, m destination.Message) (destination.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Send(ctx, m)
}

// TestStoredAnswerAndKey: the object goes to the default key, and the
// attempt's answer names its key and ETag.
func TestStoredAnswerAndKey(t *testing.T) {
	f := newFakeS3(t)
	p := open(t, f.config(""))
	res, err := send(t, p, message("answer", nil))
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^stored by S3 \(key payout\.paid/2025-03-09/dlv_answer\.json, ETag [0-9a-f]{32}\)$`)
	if !want.MatchString(res.Answer) {
		t.Errorf("answer %q, want %s", res.Answer, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := f.receive(ctx, t)
	if got.Key != "payout.paid/2025-03-09/dlv_answer.json" {
		t.Errorf("key %q", got.Key)
	}
	if got.Headers["content-type"] != "application/json" || got.Headers["webhook-id"] != "msg_answer" || got.Headers["user-agent"] != "webhookd/test" {
		t.Errorf("headers arrived as %v", got.Headers)
	}
}

// TestSignedByTheAccessKey: what gofakes3 does not check, the gate
// does: every PutObject carried SigV4 by the configured key id, for
// the configured region, and none was refused as unsigned.
func TestSignedByTheAccessKey(t *testing.T) {
	f := newFakeS3(t)
	p := open(t, f.config(""))
	if _, err := send(t, p, message("signed", nil)); err != nil {
		t.Fatal(err)
	}
	auth, _ := f.lastAuth.Load().(string)
	if !signedBy.MatchString(auth) {
		t.Errorf("the PutObject's Authorization is %q, want SigV4 by %s", auth, testKeyID)
	}
	if f.puts.Load() != 1 || f.unsigned.Load() != 0 {
		t.Errorf("%d puts, %d unsigned; want 1 signed", f.puts.Load(), f.unsigned.Load())
	}
}

// TestAccessDeniedIsAuthFailed: S3's AccessDenied (here the gate's, for
// another key id) is auth_failed, in S3's own words.
func TestAccessDeniedIsAuthFailed(t *testing.T) {
	f := newFakeS3(t)
	p := open(t, strings.Replace(f.config(""), testKeyID, "AKIAOTHER", 1))
	_, err := send(t, p, message("denied", nil))
	code, said := destination.Classify(err)
	if code != destination.CodeAuthFailed || said != "S3 answered HTTP 403 AccessDenied" {
		t.Errorf("failed as %s (%s), want %s (S3 answered HTTP 403 AccessDenied)", code, said, destination.CodeAuthFailed)
	}
}

// TestNoSuchBucketIsRefused: a bucket that does not exist is
// broker_refused, in S3's own words.
func TestNoSuchBucketIsRefused(t *testing.T) {
	f := newFakeS3(t)
	p := open(t, strings.Replace(f.config(""), `"bucket": "webhooks"`, `"bucket": "no-such-bucket"`, 1))
	_, err := send(t, p, message("nobucket", nil))
	code, said := destination.Classify(err)
	if code != destination.CodeRefused || said != "S3 answered HTTP 404 NoSuchBucket" {
		t.Errorf("failed as %s (%s), want %s (S3 answered HTTP 404 NoSuchBucket)", code, said, destination.CodeRefused)
	}
}

// TestMetadataRefusedBeforeSending: headers S3's user metadata cannot
// carry fail as broker_refused in fixed words, and no request is made.
func TestMetadataRefusedBeforeSending(t *testing.T) {
	f := newFakeS3(t)
	p := open(t, f.config(""))
	for _, tc := range []struct {
		name    string
		headers map[string]string
		said    string
	}{
		{"more than 2 KiB of headers", map[string]string{"x-merchant-a": strings.Repeat("a", 1200), "x-merchant-b": strings.Repeat("b", 1200)},
			"the headers are larger than the 2 KiB of user metadata S3 keeps with an object"},
		{"a value that is not ASCII", map[string]string{"x-merchant-city": "Zürich"}, "a header value is not printable ASCII, which S3 user metadata requires"},
		{"a value with a control character", map[string]string{"x-merchant-a": "a\r\nx-amz-acl: public-read"}, "a header value is not printable ASCII, which S3 user metadata requires"},
		{"a name that is not a token", map[string]string{"x merchant": "a"}, "a header name cannot be carried as S3 user metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.puts.Load()
			_, err := send(t, p, message("meta", tc.headers))
			code, said := destination.Classify(err)
			if code != destination.CodeRefused || said != tc.said {
				t.Errorf("failed as %s (%s), want %s (%s)", code, said, destination.CodeRefused, tc.said)
			}
			if n := f.puts.Load() - before; n != 0 {
				t.Errorf("%d requests were made", n)
			}
		})
	}
	// Just under the bound is sent: 2048 bytes of names and values.
	under := message("under", nil)
	size := 0
	for k, v := range under.Headers {
		if k != "content-type" {
			size += len(k) + len(v)
		}
	}
	under.Headers["x-fill"] = strings.Repeat("f", s3.MaxMetadata-size-len("x-fill"))
	if _, err := s3.Metadata(under.Headers); err != nil {
		t.Errorf("metadata of exactly %d bytes refused: %v", s3.MaxMetadata, err)
	}
	under.Headers["x-fill"] += "f"
	if _, err := s3.Metadata(under.Headers); err == nil {
		t.Errorf("metadata of %d bytes accepted", s3.MaxMetadata+1)
	}
}

// TestConcurrentSends: one publisher, many sends at once, every object
// stored.
func TestConcurrentSends(t *testing.T) {
	f := newFakeS3(t)
	p := open(t, f.config(""))
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := send(t, p, message(fmt.Sprintf("concurrent_%d", i), nil))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	for range n {
		keys = append(keys, f.receive(ctx, t).Key)
	}
	for i := range n {
		if want := fmt.Sprintf("payout.paid/2025-03-09/dlv_concurrent_%d.json", i); !slices.Contains(keys, want) {
			t.Errorf("object %s missing from %v", want, keys)
		}
	}
}

// TestKeyTemplateExpand: what each placeholder becomes, and what a
// value cannot put in a key.
func TestKeyTemplateExpand(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	base := destination.Message{DeliveryID: "dlv_1", EventID: "evt_1", EventType: "payout.paid",
		SignedAt: time.Date(2025, 3, 10, 0, 30, 0, 0, paris), Size: 1} // 2025-03-09 23:30 UTC
	for _, tc := range []struct {
		name, template string
		edit           func(*destination.Message)
		want           string
	}{
		{"the default", s3.DefaultKeyTemplate, nil, "payout.paid/2025-03-09/dlv_1.json"},
		{"date and hour are UTC", "{date}/{hour}/{delivery_id}", nil, "2025-03-09/23/dlv_1"},
		{"every placeholder", "{event_type}-{event_id}-{delivery_id}", nil, "payout.paid-evt_1-dlv_1"},
		{"a batch's event type", s3.DefaultKeyTemplate, func(m *destination.Message) { m.EventType, m.Size = "", 3 }, "batch/2025-03-09/dlv_1.json"},
		{"a slash in a value adds no folder", "{event_type}/{delivery_id}", func(m *destination.Message) { m.EventType = "a/../../b" }, "a_.__.__b/dlv_1"},
		{"dots at a value's edges never make ..", "x.{event_type}.json/{delivery_id}", func(m *destination.Message) { m.EventType = ".payout." }, "x._payout_.json/dlv_1"},
		{"a value of dots is no . segment", "{event_type}/{delivery_id}", func(m *destination.Message) { m.EventType = "." }, "_/dlv_1"},
		{"characters outside an event type's are _", "{event_type}/{delivery_id}", func(m *destination.Message) { m.EventType = "zahlung ausgeführt?%" }, "zahlung_ausgef_hrt__/dlv_1"},
		{"an empty value is _", "{event_id}/{delivery_id}", func(m *destination.Message) { m.EventID = "" }, "_/dlv_1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := s3.ParseKeyTemplate("key_template", tc.template)
			if err != nil {
				t.Fatal(err)
			}
			m := base
			if tc.edit != nil {
				tc.edit(&m)
			}
			got := tpl.Expand(m)
			if got != tc.want {
				t.Errorf("key %q, want %q", got, tc.want)
			}
			if strings.Contains(got, "..") || strings.HasPrefix(got, "/") {
				t.Errorf("key %q climbs", got)
			}
		})
	}
}

// TestKeyTemplateRefusal: a refusal names the field and its rule,
// never the value.
func TestKeyTemplateRefusal(t *testing.T) {
	_, err := s3.ParseKeyTemplate("destination.key_template", "{aws_secret}/{delivery_id}")
	var bad *invalid.Error
	if !errors.As(err, &bad) || bad.Param != "destination.key_template" || bad.Rule != "destination_key_template_invalid" || strings.Contains(bad.Message, "aws_secret") {
		t.Fatalf("refusal %v", err)
	}
}

// TestLongKeyRefused: a key longer than S3's 1024 bytes once expanded
// is refused before sending.
func TestLongKeyRefused(t *testing.T) {
	f := newFakeS3(t)
	p := open(t, f.config(`, "key_template": "{event_type}/{event_type}/{event_type}/{delivery_id}"`))
	m := message("long", nil)
	m.EventType = strings.Repeat("e", 400)
	_, err := send(t, p, m)
	code, said := destination.Classify(err)
	if code != destination.CodeRefused || said != "the object key would be longer than the 1024 bytes S3 allows" {
		t.Errorf("failed as %s (%s)", code, said)
	}
	if f.puts.Load() != 0 {
		t.Errorf("%d requests were made", f.puts.Load())
	}
}
