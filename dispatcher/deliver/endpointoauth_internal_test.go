package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/testfixtures/tokenserver"
	"github.com/webhookd/webhookd/signer"
)

// TestBearerTokenExchange: an OAuth2 subscription's request carries the
// token in Authorization, whatever the subscription's own headers say; a
// 401 is answered by one more request with a new token; a token endpoint
// that fails is an oauth_token result with its status, and its 410 is not
// the receiver's (the subscription is not disabled for it).
func TestBearerTokenExchange(t *testing.T) {
	t.Parallel()
	masterKey := bytes.Repeat([]byte{9}, 32)
	sealer, err := signer.NewSealer(masterKey)
	if err != nil {
		t.Fatal(err)
	}
	server := tokenserver.New(t, "webhookd", time.Now)
	server.Accept("secret")
	var mu sync.Mutex
	var seen []string
	status := http.StatusNoContent
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Header.Get("Authorization"))
		w.WriteHeader(status)
	}))
	defer receiver.Close()
	snd := oauthSender(t, masterKey)
	oauth := oauthEndpoint(t, sealer, server.TokenURL())
	answer := func(code int) {
		mu.Lock()
		defer mu.Unlock()
		status, seen = code, nil
	}
	saw := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
	send := func() Result {
		t.Helper()
		res, err := snd.Send(context.Background(), Request{Target: receiver.URL, EventID: "evt", Body: []byte(`{}`),
			Headers: map[string]string{"Authorization": "Basic bWVyY2hhbnQ="}, OAuth: oauth})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	if res, seen := send(), saw(); !res.OK() || len(seen) != 1 || seen[0] != "Bearer token-1-webhookd" {
		t.Fatalf("first send: %v, the receiver saw %q", res.ErrCode, seen)
	}
	answer(http.StatusUnauthorized)
	if res, seen := send(), saw(); res.HTTPStatus == nil || *res.HTTPStatus != http.StatusUnauthorized || len(seen) != 2 ||
		seen[1] != "Bearer token-2-webhookd" || server.Requests() != 2 {
		t.Fatalf("refused: %v, the receiver saw %q after %d token requests; want one retry with a new token", res.HTTPStatus, seen, server.Requests())
	}
	server.Failing(http.StatusGone)
	answer(http.StatusUnauthorized)
	res := send()
	if res.ErrCode == nil || *res.ErrCode != errOAuthToken || res.HTTPStatus == nil || *res.HTTPStatus != http.StatusGone ||
		res.gone() || !strings.Contains(res.Body, "410") {
		t.Fatalf("failing token endpoint: error %v, status %v, body %q, gone %v", res.ErrCode, res.HTTPStatus, res.Body, res.gone())
	}
}

// oauthEndpoint is the client credentials (webhookd, secret) at tokenURL of
// a new subscription, as an attempt finds them.
func oauthEndpoint(t *testing.T, sealer *signer.Sealer, tokenURL string) *EndpointOAuth {
	t.Helper()
	plain, err := json.Marshal(subscriptions.Authentication{Type: subscriptions.AuthenticationOAuth2, TokenURL: tokenURL,
		ClientID: "webhookd", ClientSecret: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := sealer.Seal(string(plain))
	if err != nil {
		t.Fatal(err)
	}
	oauth := NewSecretCache(nil, sealer).EndpointOAuth(store.LeasedDelivery{Delivery: store.Delivery{SubscriptionID: uuid.New()},
		SealedAuthentication: sealed, AuthenticationType: subscriptions.AuthenticationOAuth2})
	if oauth == nil {
		t.Fatal("no OAuth2 credentials for an oauth2 subscription")
	}
	return oauth
}

// TestRedeliverAsksTheTokenEndpointAfresh: after the token endpoint
// failed an attempt, an automatic retry within the failure's few seconds
// gets the shared failure without a request (the cache protects the
// endpoint); the merchant fixes the endpoint and redelivers at once: the
// manual attempt asks the endpoint and the delivery succeeds. Which
// attempts count as asked for by a person is explicitly's table.
func TestRedeliverAsksTheTokenEndpointAfresh(t *testing.T) {
	masterKey := bytes.Repeat([]byte{4}, 32)
	sealer, err := signer.NewSealer(masterKey)
	if err != nil {
		t.Fatal(err)
	}
	server := tokenserver.New(t, "webhookd", time.Now)
	server.Accept("secret")
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !server.Valid(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer receiver.Close()
	snd := oauthSender(t, masterKey)
	oauth := oauthEndpoint(t, sealer, server.TokenURL())
	attempt := func(at queue.Attempt, test bool) Result {
		t.Helper()
		ctx := explicitly(context.Background(), at, store.LeasedDelivery{Delivery: store.Delivery{Test: test}})
		res, err := snd.Send(ctx, Request{Target: receiver.URL, EventID: "evt", Body: []byte(`{}`), OAuth: oauth})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	scheduled := func(n int) queue.Attempt { return queue.Attempt{Trigger: store.TriggerScheduled, Number: n} }
	manual := queue.Attempt{Trigger: store.TriggerManual, Number: 3}

	server.Failing(http.StatusServiceUnavailable)
	if res := attempt(scheduled(1), false); res.ErrCode == nil || *res.ErrCode != errOAuthToken || server.Requests() != 1 {
		t.Fatalf("failing endpoint: %v after %d token requests; want oauth_token after 1", res.ErrCode, server.Requests())
	}
	server.Failing(0) // the merchant fixes it
	if res := attempt(scheduled(2), false); res.ErrCode == nil || *res.ErrCode != errOAuthToken || server.Requests() != 1 {
		t.Fatalf("automatic retry at once: %v after %d token requests; want the shared failure, no request", res.ErrCode, server.Requests())
	}
	if res := attempt(manual, false); !res.OK() || server.Requests() != 2 {
		t.Fatalf("redeliver at once: %v (%q) after %d token requests; want delivered with a token asked afresh",
			res.ErrCode, res.Body, server.Requests())
	}

	cases := []struct {
		name  string
		at    queue.Attempt
		test  bool
		asked bool
	}{
		{"a scheduled attempt", scheduled(2), false, false},
		{"a redeliver, recover or Resend", manual, false, true},
		{"a test event's first attempt", scheduled(1), true, true},
		{"a test event's retry", scheduled(2), true, false},
	}
	for _, c := range cases {
		ctx := explicitly(context.Background(), c.at, store.LeasedDelivery{Delivery: store.Delivery{Test: c.test}})
		if askedFor(ctx) != c.asked {
			t.Errorf("%s: asked for by a person %v, want %v", c.name, askedFor(ctx), c.asked)
		}
	}
}

// oauthSender is a sender whose OAuth2 tokens are shared in a Redis of its
// own, sealed with masterKey; closed when t ends.
func oauthSender(t *testing.T, masterKey []byte) *Sender {
	t.Helper()
	redis := storetest.NewRedis(t)
	snd, err := NewSender(SenderConfig{Timeout: 2 * time.Second, AllowHTTP: true, AllowPrivate: true, MaxConns: 4, MaxConnsPerHost: 2,
		Version: "test", OAuth: OAuthConfig{Redis: asynq.RedisClientOpt{Network: "unix", Addr: redis.Socket}, MasterKey: masterKey}},
		clock.System{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snd.Close)
	return snd
}
