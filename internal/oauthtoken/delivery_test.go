package oauthtoken_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/oauthtoken"
)

// deliver is what the delivery path does for a subscription with OAuth2:
// send the token, and after a 401 invalidate it and send once more with a
// new one; a second 401 is the attempt's answer.
func deliver(ctx context.Context, src *oauthtoken.Source, target string) (int, error) {
	for try := 0; ; try++ {
		tok, err := src.Token(ctx)
		if err != nil {
			return 0, err // the attempt's error is "oauth_token", with StatusOf(err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(`{"type":"payment.succeeded"}`))
		if err != nil {
			return 0, err
		}
		tok.SetAuthHeader(req.Header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || try == 1 {
			return resp.StatusCode, nil
		}
		if err := src.Invalidate(ctx, tok); err != nil {
			return 0, err
		}
	}
}

func TestDeliveriesByTwoWorkersFetchATokenOnlyWhenItExpiresOrIsRefused(t *testing.T) {
	r := newRig(t)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		if !ok || !r.server.Valid(token) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(endpoint.Close)
	deliveries := func(n int) map[int]int {
		var mu sync.Mutex
		statuses := map[int]int{}
		r.spread(n, func(w *oauthtoken.Tokens) {
			status, err := deliver(t.Context(), w.Source(subscription, r.credentials()), endpoint.URL)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
		return statuses
	}
	steps := []struct {
		name         string
		before       func()
		wantRequests int
	}{
		{"200 deliveries share one token", func() {}, 1},
		{"a token the endpoint refuses is replaced once", func() { r.server.Revoke(tokenOf(t, r.workers[0], r.credentials()).AccessToken) }, 2},
		{"an expiring token is replaced once", func() { r.clock.Advance(time.Hour) }, 3},
	}
	for _, step := range steps {
		step.before()
		statuses := deliveries(200)
		if statuses[http.StatusNoContent] != 200 {
			t.Errorf("%s: answers %v, want 200 × 204", step.name, statuses)
		}
		if n := r.server.Requests(); n != step.wantRequests {
			t.Errorf("%s: %d token requests in all, want %d", step.name, n, step.wantRequests)
		}
	}
}
