package deliver

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/kinds"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/signer"
)

// internalWords are what a merchant must never read in an attempt's
// record: this server's addresses and DNS server (127.0.0.x here), the
// network stack's and the OS's own words, a path, the egress proxy's
// host name.
var internalWords = []string{"127.0.0.", "[::1]", "dial tcp", "lookup", "connect:", "/", "egress-proxy", "nonexistent",
	"read tcp", "x509:", "tls: "}

// TestFailuresAreToldInTheMerchantsWords: whatever the failure (a closed
// port, a name DNS does not know, a certificate not trusted, a broker
// refusing the credentials, an egress proxy that cannot be reached, this
// server's own AWS credentials missing a file, a token endpoint that
// fails, hangs or cannot be reached), the attempt's record has its code
// and a body in words written for the merchant, naming nothing of this
// server's: no address, no DNS server, no path, no proxy.
func TestFailuresAreToldInTheMerchantsWords(t *testing.T) {
	masterKey := bytes.Repeat([]byte{7}, 32)
	sealer, err := signer.NewSealer(masterKey)
	if err != nil {
		t.Fatal(err)
	}
	closed := closedPort(t)
	badCert := httptest.NewTLSServer(http.NotFoundHandler())
	defer badCert.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "token endpoint down at 10.1.2.3", http.StatusInternalServerError)
	}))
	defer failing.Close()
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hanging.Close()
	defer close(release)
	sqsPrefix := "http://" + closed + "/123456789012/"
	redis := storetest.NewRedis(t)
	registry, err := kinds.Default(kinds.Options{SQSEngineQueues: []string{sqsPrefix}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := SenderConfig{Timeout: time.Second, AllowHTTP: true, AllowPrivate: true, MaxConns: 8, MaxConnsPerHost: 4, Version: "test",
		Kinds: registry,
		OAuth: OAuthConfig{Redis: asynq.RedisClientOpt{Network: "unix", Addr: redis.Socket}, MasterKey: masterKey}}
	proxied := cfg
	proxied.EgressProxy = &url.URL{Scheme: "http", Host: "egress-proxy.nosuch.invalid:3128"}

	broker := func(cfg SenderConfig, destination string) func(t *testing.T) Result {
		return func(t *testing.T) Result {
			sealed, err := sealer.Seal(destination)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := newDestinations(cfg, nil, sealer, clock.System{})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.closeAll()
			leased := store.LeasedDelivery{Delivery: store.Delivery{ID: uuid.New(), EventID: uuid.New(),
				SubscriptionID: uuid.New()}, Body: []byte(`{}`), SealedDestination: sealed}
			res, err := ds.send(context.Background(), outgoingOf(&leased, nil), Signing{}, nil)
			if err != nil {
				t.Fatalf("send: internal error %v, want a failed attempt", err)
			}
			return res
		}
	}
	token := func(tokenURL string) func(t *testing.T) Result {
		return func(t *testing.T) Result {
			oauth := oauthEndpoint(t, sealer, tokenURL)
			return post(t, cfg, "http://"+closed+"/hooks", oauth)
		}
	}
	direct := func(target string) func(t *testing.T) Result {
		return func(t *testing.T) Result { return post(t, cfg, target, nil) }
	}

	cases := []struct {
		name string
		// env is the process's environment for the case (AWS's chain reads
		// it); set cases run one after the other.
		env  map[string]string
		send func(t *testing.T) Result
		code string
		// says is what the body tells, in part.
		says string
	}{
		{name: "rabbitmq closed port", send: broker(cfg, `{"type":"rabbitmq","url":"amqp://guest:guest@`+closed+`/","routing_key":"q"}`),
			code: destination.CodeUnreachable, says: "connection refused"},
		{name: "rabbitmq unknown host", send: broker(cfg, `{"type":"rabbitmq","url":"amqp://guest:guest@nosuch.invalid:5672/","routing_key":"q"}`),
			code: destination.CodeUnreachable, says: "DNS"},
		{name: "rabbitmq untrusted certificate", send: broker(cfg, `{"type":"rabbitmq","url":"amqps://guest:guest@`+
			strings.TrimPrefix(badCert.URL, "https://")+`/","routing_key":"q"}`),
			code: destination.CodeUnreachable, says: "TLS failed"},
		{name: "rabbitmq refuses the credentials", send: broker(cfg, `{"type":"rabbitmq","url":"amqp://guest:wrong@127.0.0.1:5672/","routing_key":"q"}`),
			code: destination.CodeAuthFailed, says: "403"},
		{name: "egress proxy not found", send: broker(proxied, `{"type":"rabbitmq","url":"amqp://guest:guest@127.0.0.1:5672/","routing_key":"q"}`),
			code: destination.CodeUnreachable, says: "DNS"},
		{name: "sqs endpoint closed port", send: broker(cfg, `{"type":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/q",`+
			`"region":"eu-west-1","endpoint":"http://`+closed+`","access_key_id":"AKIAMERCHANT","secret_access_key":"merchant-secret"}`),
			code: destination.CodeUnreachable, says: "connection refused"},
		{name: "engine AWS credentials missing a file",
			env: map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": "/nonexistent/token", "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/w",
				"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": "/nonexistent/config",
				"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials", "AWS_EC2_METADATA_DISABLED": "true", "AWS_REGION": "eu-west-1"},
			send: broker(cfg, `{"type":"sqs","queue_url":"`+sqsPrefix+`q","region":"eu-west-1","endpoint":"http://`+closed+`"}`),
			code: destination.CodeAuthFailed, says: "own AWS credentials"},
		{name: "token endpoint answers 500", send: token(failing.URL + "/token"), code: errOAuthToken, says: "500"},
		{name: "token endpoint hangs", send: token(hanging.URL + "/token"), code: errOAuthToken, says: "timed out"},
		{name: "token endpoint closed port", send: token("http://" + closed + "/token"), code: errOAuthToken, says: "connection refused"},
		{name: "token endpoint unknown host", send: token("http://nosuch.invalid/token"), code: errOAuthToken, says: "DNS"},
		{name: "receiver closed port", send: direct("http://" + closed + "/hooks"), code: errConnectionRefused},
		{name: "receiver unknown host", send: direct("http://nosuch.invalid/hooks"), code: errDNS},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			res := c.send(t)
			t.Logf("%q", res.Body)
			if res.ErrCode == nil || *res.ErrCode != c.code {
				t.Fatalf("error code %v (body %q), want %s", res.ErrCode, res.Body, c.code)
			}
			for _, w := range internalWords {
				if strings.Contains(res.Body, w) {
					t.Errorf("body %q names %q", res.Body, w)
				}
			}
			if !strings.Contains(res.Body, c.says) {
				t.Errorf("body %q does not say %q", res.Body, c.says)
			}
			if c.says != "" && !strings.HasPrefix(res.Body, c.code+": ") {
				t.Errorf("body %q does not start with its code %s", res.Body, c.code)
			}
		})
	}
}

// post is one HTTP attempt of cfg's sender to target, with oauth's
// bearer token when it is not nil.
func post(t *testing.T, cfg SenderConfig, target string, oauth *EndpointOAuth) Result {
	t.Helper()
	snd, err := NewSender(cfg, clock.System{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	res, err := snd.Send(context.Background(), Request{Target: target, EventID: "evt", Body: []byte(`{}`), OAuth: oauth})
	if err != nil {
		t.Fatalf("send: internal error %v, want a failed attempt", err)
	}
	return res
}

// closedPort is a 127.0.0.1 address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
