package kinesis_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	kinesisdest "github.com/webhookd/webhookd/internal/destination/kinesis"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/testfixtures/kinesistest"
)

// A destination of the tests: kinesalite checks no signature, so any key
// is taken (and so WrongCredentials is "": auth_failed is awsdest's
// mapping of Kinesis's refusals, which kinesalite never sends).
func config(stream, endpoint string) string {
	return fmt.Sprintf(`{"type": "kinesis", "stream_name": %q, "region": "eu-west-1", "access_key_id": "AKIDEXAMPLE", `+
		`"secret_access_key": "wJalrXUtnFEMI-secret", "endpoint": %q}`, stream, endpoint)
}

// TestConformance runs desttest against kinesalite: a stream of two
// shards, read back shard by shard from its start.
func TestConformance(t *testing.T) {
	k := kinesistest.Start(t)
	const stream = "webhookd-conformance"
	k.CreateStream(t, stream, 2)
	r := kinesistest.NewReader(k, stream)
	desttest.Run(t, desttest.Case{
		Kind:    kinesisdest.New(),
		Config:  config(stream, k.URL),
		Receive: r.Receive,
		// kinesalite checks no credentials: it takes any key.
		WrongCredentials: "",
		// Down stops kinesalite; up starts it again on the same port,
		// where its streams (kept in memory) are gone, so the stream is
		// made again and the reader starts over.
		Down: func(t testing.TB) func() {
			k.Stop(t)
			return func() {
				k.Start(t)
				k.CreateStream(t, stream, 2)
				r.Reset()
			}
		},
		Oversized: func(url string) string { return config(stream, url) },
		Hostile: []desttest.Hostile{
			{Name: "a stream name with a path", Config: config("webhooks/../../etc/passwd", "https://kinesis.example.com"),
				Field: "destination.stream_name", Secret: "/etc/passwd"},
			{Name: "an endpoint with a query", Config: config("webhooks", "https://kinesis.example.com/?file=/etc/passwd"),
				Field: "destination.endpoint", Secret: "/etc/passwd"},
			{Name: "a field Kinesis has and this kind does not", Config: `{"type": "kinesis", "stream_name": "webhooks", "region": "eu-west-1", ` +
				`"access_key_id": "AKID", "secret_access_key": "s", "stream_arn": "arn:aws:kinesis:eu-west-1:1:stream/x"}`,
				Field: "destination.stream_arn", Secret: "arn:aws"},
			{Name: "a region that is a host", Config: `{"type": "kinesis", "stream_name": "webhooks", "region": "evil.example.com/x", ` +
				`"access_key_id": "AKID", "secret_access_key": "s"}`, Field: "destination.region", Secret: "evil.example.com"},
		},
	})
}

// TestPartitionKey: a delivery's ordering key is the record's partition
// key, its event id when unordered, and a key longer than Kinesis takes
// (256 UTF-16 code units) arrives as its SHA-256, the same for the same
// key. kinesalite refuses a key over 256 units, as Kinesis does: the keys
// at the limit prove the count is the server's.
func TestPartitionKey(t *testing.T) {
	k := kinesistest.Start(t)
	const stream = "webhookd-keys"
	k.CreateStream(t, stream, 1)
	r := kinesistest.NewReader(k, stream)
	p := open(t, config(stream, k.URL), defaultEnv())

	long := strings.Repeat("é", kinesisdest.MaxPartitionKey+1)
	sum := sha256.Sum256([]byte(long))
	atLimit := strings.Repeat("é", kinesisdest.MaxPartitionKey)
	emoji := strings.Repeat("\U0001F600", kinesisdest.MaxPartitionKey/2)
	for _, tc := range []struct {
		name, orderingKey, eventID, want string
	}{
		{"the ordering key", "payout_42", "evt_1", "payout_42"},
		{"the event id when unordered", "", "evt_2", "evt_2"},
		{"a key of 256 characters as it is", atLimit, "evt_3", atLimit},
		{"a key of 128 emoji (256 UTF-16 units) as it is", emoji, "evt_3e", emoji},
		{"a longer key hashed", long, "evt_4", hex.EncodeToString(sum[:])},
		{"the same longer key, the same hash", long, "evt_5", hex.EncodeToString(sum[:])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := message(tc.eventID, tc.orderingKey, []byte(`{"id":"`+tc.eventID+`"}`))
			if _, err := send(p, m); err != nil {
				t.Fatal(err)
			}
			got := receive(t, r)
			if got.Key != tc.want {
				t.Errorf("partition key %q, want %q", got.Key, tc.want)
			}
			if got.Headers["webhook-id"] != m.Headers["webhook-id"] {
				t.Errorf("record %s, want %s", got.Headers["webhook-id"], m.Headers["webhook-id"])
			}
		})
	}
}

// TestServerKeyLimit: kinesalite, like Kinesis, refuses a partition key
// of 257 UTF-16 code units that is 129 characters, so counting
// characters alone would send keys the server refuses.
func TestServerKeyLimit(t *testing.T) {
	k := kinesistest.Start(t)
	const stream = "webhookd-keylimit"
	k.CreateStream(t, stream, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := strings.Repeat("\U0001F600", kinesisdest.MaxPartitionKey/2) + "k"
	_, err := k.Client().PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), Data: []byte("{}"), PartitionKey: aws.String(key)})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" {
		t.Fatalf("kinesalite took a key of %d UTF-16 units: %v", kinesisdest.MaxPartitionKey+1, err)
	}
}

// TestAnswer: the attempt's answer is Kinesis's sequence number and shard.
func TestAnswer(t *testing.T) {
	k := kinesistest.Start(t)
	const stream = "webhookd-answer"
	k.CreateStream(t, stream, 1)
	p := open(t, config(stream, k.URL), defaultEnv())
	res, err := send(p, message("evt_answer", "", []byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^confirmed by Kinesis \(sequence number [0-9]+, shard shardId-000000000000\)$`).MatchString(res.Answer) {
		t.Errorf("answer %q", res.Answer)
	}
}

// TestRecordSize: a record of 1 MiB, data and partition key together
// (Kinesis's limit of a record), is put; one byte more is refused in
// fixed words before anything is dialled. (kinesalite limits the data
// alone to 1 MiB: the key counted too keeps within Kinesis's rule.)
func TestRecordSize(t *testing.T) {
	k := kinesistest.Start(t)
	const stream = "webhookd-size"
	k.CreateStream(t, stream, 1)
	r := kinesistest.NewReader(k, stream)

	// The frame's bytes besides the body, for a body of plain letters.
	m := message("evt_size", "", nil)
	empty, _ := json.Marshal(kinesisdest.Frame{Headers: m.Headers, Body: ""})
	fits := kinesisdest.MaxRecord - len(empty) - len(m.EventID)
	m.Body = bytes.Repeat([]byte("a"), fits)

	t.Run("at the limit, put", func(t *testing.T) {
		p := open(t, config(stream, k.URL), defaultEnv())
		if _, err := send(p, m); err != nil {
			code, said := destination.Classify(err)
			t.Fatalf("a record of exactly %d bytes: %s: %s (%v)", kinesisdest.MaxRecord, code, said, err)
		}
		if got := receive(t, r); len(got.Body) != fits {
			t.Errorf("body of %d bytes arrived as %d", fits, len(got.Body))
		}
	})
	t.Run("one byte over, refused before sending", func(t *testing.T) {
		var dials atomic.Int32
		env := defaultEnv()
		env.Dial = func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			return nil, errors.New("no dial expected")
		}
		p := open(t, config(stream, k.URL), env)
		over := m
		over.Body = append(bytes.Repeat([]byte("a"), fits), 'a')
		_, err := send(p, over)
		code, said := destination.Classify(err)
		if code != destination.CodeRefused || said != "the message is larger than a Kinesis record takes (1 MiB with its partition key); nothing was sent" {
			t.Errorf("failed as %s: %s (%v), want broker_refused in fixed words", code, said, err)
		}
		if n := dials.Load(); n != 0 {
			t.Errorf("dialled %d times for a record refused before sending", n)
		}
	})
}

// TestNoSuchStream: a stream that does not exist is Kinesis's refusal,
// in its status and code.
func TestNoSuchStream(t *testing.T) {
	k := kinesistest.Start(t)
	p := open(t, config("webhookd-missing", k.URL), defaultEnv())
	_, err := send(p, message("evt_missing", "", []byte(`{}`)))
	code, said := destination.Classify(err)
	if code != destination.CodeRefused || said != "Kinesis answered HTTP 400 ResourceNotFoundException" {
		t.Errorf("failed as %s: %s (%v)", code, said, err)
	}
	desttest.CheckMerchantWords(t, said)
}

// TestParse is the kind's field rules, a row each: what is taken, what
// is refused and which field the refusal names, never quoting the value.
func TestParse(t *testing.T) {
	const account = `"region": "eu-west-1", "access_key_id": "AKIDEXAMPLE", "secret_access_key": "wJalrXUtnFEMI-secret"`
	for _, tc := range []struct {
		name   string
		raw    string
		field  string // "" when taken
		secret string // a part of the value the refusal must not quote
	}{
		{"a stream and an account", `{"type": "kinesis", "stream_name": "webhooks", ` + account + `}`, "", ""},
		{"a stream name of every allowed character", `{"type": "kinesis", "stream_name": "Web_hooks-1.prod", ` + account + `}`, "", ""},
		{"a stream name of 128 characters", `{"type": "kinesis", "stream_name": "` + strings.Repeat("s", 128) + `", ` + account + `}`, "", ""},
		{"a compatible server's endpoint", `{"type": "kinesis", "stream_name": "webhooks", ` + account + `, "endpoint": "https://kinesis.example.com:4567"}`, "", ""},
		{"no stream name", `{"type": "kinesis", ` + account + `}`, "destination.stream_name", ""},
		{"an empty stream name", `{"type": "kinesis", "stream_name": "", ` + account + `}`, "destination.stream_name", ""},
		{"a stream name of 129 characters", `{"type": "kinesis", "stream_name": "` + strings.Repeat("s", 129) + `", ` + account + `}`, "destination.stream_name", ""},
		{"a stream name with a space", `{"type": "kinesis", "stream_name": "web hooks", ` + account + `}`, "destination.stream_name", "web hooks"},
		{"a stream name with a control character", `{"type": "kinesis", "stream_name": "webhooks\r\nx-injected", ` + account + `}`, "destination.stream_name", "injected"},
		{"a stream ARN for a name", `{"type": "kinesis", "stream_name": "arn:aws:kinesis:eu-west-1:123456789012:stream/webhooks", ` + account + `}`, "destination.stream_name", "123456789012"},
		{"a stream name not a string", `{"type": "kinesis", "stream_name": ["webhooks"], ` + account + `}`, "destination.stream_name", ""},
		{"no region", `{"type": "kinesis", "stream_name": "webhooks", "access_key_id": "AKID", "secret_access_key": "s"}`, "destination.region", ""},
		{"a region with a path", `{"type": "kinesis", "stream_name": "webhooks", "region": "eu-west-1/../x", "access_key_id": "AKID", "secret_access_key": "s"}`, "destination.region", "../x"},
		{"no access key", `{"type": "kinesis", "stream_name": "webhooks", "region": "eu-west-1", "secret_access_key": "s"}`, "destination.access_key_id", ""},
		{"no secret key", `{"type": "kinesis", "stream_name": "webhooks", "region": "eu-west-1", "access_key_id": "AKID"}`, "destination.secret_access_key", ""},
		{"a secret key of 256 characters", `{"type": "kinesis", "stream_name": "webhooks", "region": "eu-west-1", "access_key_id": "AKID", "secret_access_key": "` +
			strings.Repeat("k", 256) + `"}`, "destination.secret_access_key", "kkkkkkkk"},
		{"a secret key with a newline", `{"type": "kinesis", "stream_name": "webhooks", "region": "eu-west-1", "access_key_id": "AKID", "secret_access_key": "s3cr\nQ9zz"}`,
			"destination.secret_access_key", "Q9zz"},
		{"an endpoint with credentials", `{"type": "kinesis", "stream_name": "webhooks", ` + account + `, "endpoint": "https://user:hunter2@kinesis.example.com"}`,
			"destination.endpoint", "hunter2"},
		{"an endpoint with a fragment", `{"type": "kinesis", "stream_name": "webhooks", ` + account + `, "endpoint": "https://kinesis.example.com/#Q9zz"}`,
			"destination.endpoint", "Q9zz"},
		{"an endpoint not http", `{"type": "kinesis", "stream_name": "webhooks", ` + account + `, "endpoint": "file:///etc/passwd"}`,
			"destination.endpoint", "/etc/passwd"},
		{"an endpoint with a bad port", `{"type": "kinesis", "stream_name": "webhooks", ` + account + `, "endpoint": "https://kinesis.example.com:99999"}`,
			"destination.endpoint", "99999"},
		{"an endpoint's host with a zone", `{"type": "kinesis", "stream_name": "webhooks", ` + account + `, "endpoint": "https://[fe80::1%25eth0]"}`,
			"destination.endpoint", "eth0"},
		{"an unknown member", `{"type": "kinesis", "stream_name": "webhooks", ` + account + `, "explicit_hash_key": "1"}`, "destination.explicit_hash_key", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cfg, err := registry(t).Parse("destination", json.RawMessage(tc.raw))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if cfg.Plaintext() != "" {
					t.Errorf("plaintext field %q for an https destination", cfg.Plaintext())
				}
				return
			}
			bad := invalid.As(err)
			if bad == nil {
				t.Fatalf("Parse: %v, want a refusal naming %s", err, tc.field)
			}
			if bad.Param != tc.field {
				t.Errorf("refusal names %s (%s), want %s", bad.Param, bad.Message, tc.field)
			}
			if tc.secret != "" && strings.Contains(bad.Message, tc.secret) {
				t.Errorf("refusal %q quotes the value", bad.Message)
			}
		})
	}
}

// TestConfigShowsNoSecret: every printed form of a destination, and its
// summary, target and addresses, lack the secret key.
func TestConfigShowsNoSecret(t *testing.T) {
	_, cfg, err := registry(t).Parse("destination", json.RawMessage(config("webhooks", "http://kinesis.example.com:4567")))
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("destination", "destination", cfg)
	summary, _ := json.Marshal(cfg.Summary())
	addresses, _ := json.Marshal(cfg.Addresses())
	for what, text := range map[string]string{
		"%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg), "%#v": fmt.Sprintf("%#v", cfg), "%s": fmt.Sprintf("%s", cfg),
		"log": logged.String(), "summary": string(summary), "target": cfg.Target(), "addresses": string(addresses),
	} {
		if strings.Contains(text, "wJalrXUtnFEMI") {
			t.Errorf("%s shows the secret key: %s", what, text)
		}
	}
	if got, want := cfg.Target(), "kinesis://eu-west-1/webhooks via http://kinesis.example.com:4567"; got != want {
		t.Errorf("target %q, want %q", got, want)
	}
	if cfg.Plaintext() != "endpoint" {
		t.Errorf("an http:// endpoint's plaintext field is %q, want endpoint", cfg.Plaintext())
	}
	if !strings.Contains(string(summary), destination.Masked) {
		t.Errorf("summary %s does not mask the secret key", summary)
	}
}

func registry(t testing.TB) *destination.Registry {
	t.Helper()
	r, err := destination.NewRegistry(kinesisdest.New())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func defaultEnv() destination.Env {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return destination.Env{Dial: d.DialContext, Timeout: 5 * time.Second, Clock: clock.Or(nil), Version: "test"}
}

func open(t testing.TB, raw string, env destination.Env) destination.Publisher {
	t.Helper()
	r := registry(t)
	typ, cfg, err := r.Parse("destination", json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Open(typ, cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func send(p destination.Publisher, m destination.Message) (destination.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Send(ctx, m)
}

func receive(t testing.TB, r *kinesistest.Reader) desttest.Arrived {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.Receive(ctx, t)
}

// message is a delivery of event id with made-up headers: these tests
// look at keys, sizes and answers; desttest checks signatures.
func message(eventID, orderingKey string, body []byte) destination.Message {
	return destination.Message{DeliveryID: "dlv_" + eventID, EventID: eventID, Body: body, ContentType: "application/json",
		Headers: map[string]string{"webhook-id": "msg_" + eventID, "webhook-timestamp": "1700000000",
			"webhook-signature": "v1,c2lnbmF0dXJl", "content-type": "application/json"},
		OrderingKey: orderingKey, SignedAt: time.Unix(1700000000, 0), Size: 1}
}

// TestEarlyAnswerReadWhole: an endpoint that answers before it has read
// the request (as desttest's endless server does) still has its answer
// read to the bound, 50 times over: the SDK closes a request's body once
// the answer's headers are in, and a transport still writing it would
// close the connection under the answer (a refusal of HTTP 200, one time
// in six before wholeRequests).
func TestEarlyAnswerReadWhole(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		chunk := []byte(strings.Repeat("{", 64<<10))
		for range 32 { // 2 MiB, past the bound
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	p := open(t, config("webhookd-early", srv.URL), defaultEnv())
	for i := range 50 {
		_, err := send(p, message("evt_early_"+strconv.Itoa(i), "", []byte(`{}`)))
		if code, said := destination.Classify(err); code != destination.CodeTooLarge {
			t.Fatalf("send %d failed as %s: %s (%v), want response_too_large", i, code, said, err)
		}
	}
}
