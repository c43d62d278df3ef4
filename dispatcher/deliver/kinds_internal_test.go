package deliver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/destination/webhook"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/testpki"
	"github.com/webhookd/webhookd/internal/testfixtures/tokenserver"
)

// endpointAt is the HTTP kind's publisher sending to one endpoint with
// its credentials: what a subscription's url and authentication give
// each message (outgoingOf, SecretCache.credentials).
type endpointAt struct {
	destination.Publisher
	url         string
	credentials any
}

func (e endpointAt) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	m.URL, m.Credentials = e.url, e.credentials
	return e.Publisher.Send(ctx, m)
}

// TestWebhookConformance runs the conformance suite on the HTTP endpoint
// kind, sent by the engine's sender: to a real 127.0.0.1 endpoint that
// requires the subscription's client certificate (mTLS), an endpoint
// where nothing listens (connection_refused), and an OAuth2 endpoint
// whose token endpoint refuses the client's secret (oauth_token).
func TestWebhookConformance(t *testing.T) {
	t.Parallel()
	masterKey := bytes.Repeat([]byte{5}, 32)
	sealer := newTestSealer(t)
	snd := oauthSender(t, masterKey)
	serverCA, clientCA := testpki.NewCA(t, "endpoint CA"), testpki.NewCA(t, "merchant client CA")
	snd.http.Transport.(*http.Transport).TLSClientConfig.RootCAs = serverCA.Pool()

	arrived := make(chan desttest.Arrived, 100)
	srv := testpki.ServeMTLS(t, serverCA, clientCA, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		headers := map[string]string{}
		for name := range r.Header {
			headers[strings.ToLower(name)] = r.Header.Get(name)
		}
		arrived <- desttest.Arrived{Body: body, Headers: headers}
		w.WriteHeader(http.StatusNoContent)
	}))
	mtls := endpointCredentials{tls: endpointTLSOf(t, sealer, clientCA.ValidClient(t, "webhookd"), serverCA.PEM)}

	tokens := tokenserver.New(t, "webhookd", time.Now)
	tokens.Accept("not the subscription's secret")
	refused := endpointCredentials{oauth: oauthEndpoint(t, sealer, tokens.TokenURL())}

	kind := webhook.New(httpKind{snd})
	desttest.Run(t, desttest.Case{
		Kind:             kind,
		Config:           "mtls",
		WrongCredentials: "oauth refused",
		Unreachable:      "down",
		Open: func(t testing.TB, config string) destination.Publisher {
			pub, err := kind.Open(nil, destination.Env{})
			if err != nil {
				t.Fatal(err)
			}
			switch config {
			case "mtls":
				return endpointAt{Publisher: pub, url: srv.URL + "/hooks", credentials: mtls}
			case "oauth refused":
				return endpointAt{Publisher: pub, url: srv.URL + "/hooks", credentials: refused}
			default:
				return endpointAt{Publisher: pub, url: "http://" + closedPort(t.(*testing.T)) + "/hooks"}
			}
		},
		Receive: func(ctx context.Context, t testing.TB) desttest.Arrived {
			select {
			case a := <-arrived:
				return a
			case <-ctx.Done():
				t.Fatal("no request arrived")
				return desttest.Arrived{}
			}
		},
		Codes: desttest.Codes{Unreachable: []string{errConnectionRefused}, Auth: []string{errOAuthToken}},
		NotApplicable: map[string]string{
			"answer past the read bound": "an endpoint's answer is the attempt's own: its first 1 KiB is recorded and the rest " +
				"dropped with the connection, never a failure (TestWebhookAnswerBounded)",
			"closed publisher sends nothing": "the kind's publisher is the worker's one sender, shared by every endpoint and " +
				"closed with the worker; a change of a subscription changes what its next message carries (url, credentials)",
		},
	})
}

// TestWebhookAnswerBounded: an endpoint answering without end is read to
// the record's bound, its answer recorded cut and the attempt decided by
// its status, the connection dropped rather than read on.
func TestWebhookAnswerBounded(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusServiceUnavailable)
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 1024 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	snd, err := NewSender(SenderConfig{Timeout: 5 * time.Second, AllowHTTP: true, AllowPrivate: true, MaxConns: 2, MaxConnsPerHost: 1,
		Version: "test"}, clock.System{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snd.Close)
	pub, _ := webhook.New(httpKind{snd}).Open(nil, destination.Env{})
	ds := &destinations{version: "test"}
	leased := store.LeasedDelivery{Delivery: store.Delivery{ID: uuid.New(), EventID: uuid.New(), SubscriptionID: uuid.New()},
		Body: []byte(`{}`), URL: srv.URL}
	m, err := ds.message(outgoingOf(&leased, nil), Signing{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	res, err := pub.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status == nil || *res.Status != http.StatusServiceUnavailable || res.Code == nil || *res.Code != errHTTPStatus ||
		len(res.Answer) != maxResponseBody || res.Outcome != destination.OutcomeHTTPError || res.RetryAfter != 30*time.Second {
		t.Fatalf("result %+v: want the 503, its first 1 KiB, http_status", res)
	}
}
