package sqs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/awsdest"
)

// TestAttributes: the verifying and ordering headers always travel, the
// subscription's own next, user-agent only while there is room, and more
// than ten without it is broker_refused.
func TestAttributes(t *testing.T) {
	t.Parallel()
	base := map[string]string{"webhook-id": "msg_1", "webhook-timestamp": "1", "webhook-signature": "v1,x",
		"content-type": "application/json", "user-agent": "webhookd/test"}
	with := func(n int, ordered bool) map[string]string {
		h := maps.Clone(base)
		if ordered {
			h["webhook-ordering-key"], h["webhook-sequence"] = "acct_1", "3"
		}
		for i := range n {
			h[fmt.Sprintf("x-custom-%d", i)] = "v"
		}
		return h
	}
	tests := []struct {
		name      string
		headers   map[string]string
		want      int
		userAgent bool
		refused   bool
	}{
		{"no custom header", with(0, false), 5, true, false},
		{"five custom headers", with(5, false), 10, true, false},
		{"six custom headers: no room for user-agent", with(6, false), 10, false, false},
		{"seven custom headers", with(7, false), 0, false, true},
		{"ordered, four custom headers", with(4, true), 10, false, false},
		{"ordered, five custom headers", with(5, true), 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attrs, err := attributes(tt.headers)
			if tt.refused {
				code, said := destination.Classify(err)
				if code != destination.CodeRefused || !strings.Contains(said, "at most 10") {
					t.Fatalf("err = %v (%s %q), want broker_refused naming the limit", err, code, said)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(attrs) != tt.want {
				t.Errorf("%d attributes (%v), want %d", len(attrs), slices.Sorted(maps.Keys(attrs)), tt.want)
			}
			for _, n := range []string{"webhook-id", "webhook-timestamp", "webhook-signature", "content-type"} {
				if a, ok := attrs[n]; !ok || aws.ToString(a.DataType) != "String" || aws.ToString(a.StringValue) != tt.headers[n] {
					t.Errorf("attribute %s: %+v", n, a)
				}
			}
			if _, ok := attrs["user-agent"]; ok != tt.userAgent {
				t.Errorf("user-agent sent: %v, want %v", ok, tt.userAgent)
			}
		})
	}
	if attrs, err := attributes(map[string]string{"webhook-id": "msg_1", "x-empty": ""}); err != nil || len(attrs) != 1 {
		t.Errorf("an empty header: %v %v, want it left out (SQS refuses an empty value)", attrs, err)
	}
}

// TestGroupID: an ordered message's group is its key, or the key's hash
// when SQS would refuse the key; an unordered one's its delivery id.
func TestGroupID(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 129)
	tests := []struct {
		name, key, want string
	}{
		{"unordered", "", "del_1"},
		{"ordered", "acct_1", "acct_1"},
		{"punctuation", "a/b:c!", "a/b:c!"},
		{"too long", long, "e3b0"},
		{"a space", "acct 1", "e3b0"},
		{"not ASCII", "compte_é", "e3b0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := groupID(destination.Message{DeliveryID: "del_1", OrderingKey: tt.key})
			if tt.want == "e3b0" {
				if len(got) != 64 || got != groupID(destination.Message{DeliveryID: "del_2", OrderingKey: tt.key}) {
					t.Errorf("group %q, want the key's SHA-256 in hex, the same for every delivery of the key", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("group %q, want %q", got, tt.want)
			}
		})
	}
	if dedupID(destination.Message{DeliveryID: "del_1"}) != "del_1" {
		t.Error("the deduplication id is not the delivery id")
	}
}

// TestClassify: what SQS answered, or did not, gives the attempt's error
// code (awsdest.Classify, as the publisher calls it), in today's words.
func TestClassify(t *testing.T) {
	t.Parallel()
	status := func(code int, err error) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: err}
	}
	tests := []struct {
		name string
		err  error
		want string
		said string // "" for the kind's words (failtext)
	}{
		{"unknown key", status(400, &smithy.GenericAPIError{Code: "InvalidClientTokenId"}), destination.CodeAuthFailed, "SQS answered HTTP 400 InvalidClientTokenId"},
		{"bad signature", status(403, &smithy.GenericAPIError{Code: "SignatureDoesNotMatch"}), destination.CodeAuthFailed, "SQS answered HTTP 403 SignatureDoesNotMatch"},
		{"KMS denied", status(400, &smithy.GenericAPIError{Code: "KMS.AccessDeniedException"}), destination.CodeAuthFailed, "SQS answered HTTP 400 KMS.AccessDeniedException"},
		{"forbidden, no code", status(403, errors.New("forbidden")), destination.CodeAuthFailed, "SQS answered HTTP 403"},
		{"no such queue", status(400, &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue"}), destination.CodeRefused,
			"SQS answered HTTP 400 AWS.SimpleQueueService.NonExistentQueue"},
		{"message refused", status(400, &smithy.GenericAPIError{Code: "InvalidParameterValue"}), destination.CodeRefused, "SQS answered HTTP 400 InvalidParameterValue"},
		{"a code of a custom endpoint's making", status(400, &smithy.GenericAPIError{Code: "<script>"}), destination.CodeRefused, "SQS answered HTTP 400"},
		{"service error", status(500, &smithy.GenericAPIError{Code: "InternalError"}), destination.CodeNotConfirmed, "SQS answered HTTP 500 InternalError"},
		{"unavailable", status(503, errors.New("unavailable")), destination.CodeNotConfirmed, "SQS answered HTTP 503"},
		{"timeout", fmt.Errorf("send: %w", context.DeadlineExceeded), destination.CodeNotConfirmed, "timed out"},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), destination.CodeUnreachable, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, said := destination.Classify(awsdest.Classify(service, tt.err))
			if code != tt.want || said != tt.said {
				t.Errorf("Classify(%v) = %s %q, want %s %q", tt.err, code, said, tt.want, tt.said)
			}
		})
	}
}

// TestEngineCredentials: the engine's chain is loaded at the first
// message that needs it and once only; a failed load (tried again next
// time) and a failed retrieve are auth_failed, through the SDK's
// wrapping and awsdest.Classify.
func TestEngineCredentials(t *testing.T) {
	t.Parallel()
	loads := 0
	var loadErr error
	e := newEngineCredentials()
	e.load = func(context.Context) (aws.Config, error) {
		loads++
		if loadErr != nil {
			return aws.Config{}, loadErr
		}
		return aws.Config{Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no EC2 IMDS role found")
		})}, nil
	}
	ctx := context.Background()
	authFailed := func(err error, why string) {
		t.Helper()
		code, said := destination.Classify(awsdest.Classify(service, err))
		if code != destination.CodeAuthFailed || !strings.Contains(said, "own AWS credentials") || !strings.Contains(err.Error(), why) {
			t.Errorf("error %v (%s %q), want auth_failed saying the engine's credentials failed, logging %q", err, code, said, why)
		}
	}
	loadErr = errors.New("bad shared config")
	_, err := e.Retrieve(ctx)
	authFailed(err, "bad shared config")
	loadErr = nil
	for range 2 {
		_, err = e.Retrieve(ctx)
		authFailed(err, "no EC2 IMDS role found")
	}
	if loads != 2 {
		t.Errorf("%d loads, want 2 (the failed one tried again, then kept)", loads)
	}
	// As the SDK's signing step wraps it.
	authFailed(errors.Join(errors.New("operation error SQS: SendMessage"), err), "no EC2 IMDS role found")
}

// TestKeyedDestinationLoadsNothing: a destination's own key is always
// used; the engine's chain is not looked up for it.
func TestKeyedDestinationLoadsNothing(t *testing.T) {
	t.Parallel()
	k := New(Options{EngineQueues: []string{"https://sqs.eu-west-1.amazonaws.com/123456789012/"}}).(*kind)
	k.engine.load = func(context.Context) (aws.Config, error) {
		t.Error("the engine's chain was loaded for a destination with its own key")
		return aws.Config{}, errors.New("not for this one")
	}
	p, err := k.open(Config{QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/payouts", Region: "eu-west-1",
		AccessKeyID: "AKIAMERCHANT", SecretAccessKey: "merchant-secret"}, destination.Env{Dial: refuse(nil), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := p.client.Options().Credentials.Retrieve(context.Background())
	if err != nil || c.AccessKeyID != "AKIAMERCHANT" {
		t.Errorf("credentials %q, %v; want the destination's key", c.AccessKeyID, err)
	}
}

// refuse is a dialer that refuses every address, as the address check
// would, noting them in dialed.
func refuse(dialed *[]string) func(context.Context, string, string) (net.Conn, error) {
	return func(_ context.Context, _, address string) (net.Conn, error) {
		if dialed != nil {
			*dialed = append(*dialed, address)
		}
		return nil, errors.New("refused by the address check")
	}
}

// TestEngineCredentialsKeepTheDeliveriesDialer: a destination sent with
// the engine's credentials still dials through env.Dial; a destination
// whose queue is not allowed gets no publisher.
func TestEngineCredentialsKeepTheDeliveriesDialer(t *testing.T) {
	t.Parallel()
	const prefix = "https://sqs.eu-west-1.amazonaws.com/123456789012/"
	k := New(Options{EngineQueues: []string{prefix}}).(*kind)
	k.engine.load = func(context.Context) (aws.Config, error) {
		return aws.Config{Credentials: credentials.NewStaticCredentialsProvider("AKIAENGINE", "engine-secret", "")}, nil
	}
	var dialed []string
	env := destination.Env{Dial: refuse(&dialed), Timeout: time.Second, Clock: clock.Or(nil), Version: "test"}
	p, err := k.Open(Config{QueueURL: prefix + "payouts", Region: "eu-west-1"}, env)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Send(context.Background(), destination.Message{DeliveryID: "d1", Body: []byte(`{}`), Headers: map[string]string{"webhook-id": "e1"}})
	if code, _ := destination.Classify(err); code != destination.CodeUnreachable || len(dialed) == 0 || !strings.HasPrefix(dialed[0], "sqs.eu-west-1.amazonaws.com:") {
		t.Errorf("send = %v after dialling %v; want broker_unreachable through env.Dial to the region's SQS", err, dialed)
	}

	_, err = k.Open(Config{QueueURL: "https://sqs.eu-west-1.amazonaws.com/999999999999/payouts", Region: "eu-west-1"}, env)
	if code, said := destination.Classify(err); code != destination.CodeAuthFailed || !strings.Contains(said, "WEBHOOKD_SQS_ENGINE_CREDENTIALS") {
		t.Errorf("open of a queue not allowed: %v (%s %q), want auth_failed naming the variable", err, code, said)
	}
}

// FuzzEngineQueueAllowed: whatever queue URL and endpoint a merchant
// sends, the engine's credentials are allowed only for a URL that is a
// listed prefix followed by plain path segments, and only with no
// endpoint or the prefix's own origin.
func FuzzEngineQueueAllowed(f *testing.F) {
	const prefix = "https://sqs.eu-west-1.amazonaws.com/123456789012/"
	f.Add(prefix+"payouts", "")
	f.Add(prefix+"../999999999999/payouts", "")
	f.Add(prefix+"payouts.fifo", "https://sqs.eu-west-1.amazonaws.com/")
	f.Add(prefix+"a/b", "https://evil.example.com")
	f.Add("https://sqs.eu-west-1.amazonaws.com/1234567890123/q", "")
	f.Fuzz(func(t *testing.T, queueURL, endpoint string) {
		if !engineQueueAllowed([]string{prefix}, Config{QueueURL: queueURL, Endpoint: endpoint}) {
			return
		}
		rest, ok := strings.CutPrefix(queueURL, prefix)
		if !ok || rest == "" || strings.ContainsAny(rest, "?#%\\:@ ") || strings.Contains(rest, "..") || strings.Contains(rest, "//") {
			t.Fatalf("allowed %q: not a plain queue path under %s", queueURL, prefix)
		}
		if endpoint != "" && strings.TrimSuffix(endpoint, "/") != "https://sqs.eu-west-1.amazonaws.com" {
			t.Fatalf("allowed endpoint %q", endpoint)
		}
	})
}
