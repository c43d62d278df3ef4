package oauthtoken_test

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/oauthtoken"
)

func TestPrivateKeyJWTAssertionIsAcceptedByTheServer(t *testing.T) {
	for _, kind := range []string{"rsa2048", "p256", "p384"} {
		t.Run(kind, func(t *testing.T) {
			r := newRig(t)
			key, public := newKey(t, kind)
			r.server.PublicKey = public
			creds := r.credentials()
			creds.ClientSecret, creds.PrivateKey = "", key
			// Three fetches, each with an assertion of its own: the
			// server refuses a jti it has seen.
			for range 3 {
				tok := onlyToken(t, r.tokensFrom(t, creds, 20))
				if err := r.workers[1].Source(subscription, creds).Invalidate(t.Context(), oauthtoken.Token{AccessToken: tok}); err != nil {
					t.Fatal(err)
				}
				r.clock.Advance(time.Second)
			}
			if why := r.server.Refused(); len(why) != 0 {
				t.Fatalf("the token server refused the assertion: %v", why)
			}
			if n := r.server.Requests(); n != 3 {
				t.Errorf("%d token requests, want 3", n)
			}
		})
	}
}

func TestAssertionSignedWithAnotherKeyIsRefused(t *testing.T) {
	r := newRig(t)
	_, public := newKey(t, "p256")
	r.server.PublicKey = public
	other, _ := newKey(t, "p256")
	creds := r.credentials()
	creds.ClientSecret, creds.PrivateKey = "", other
	_, err := r.workers[0].Source(subscription, creds).Token(t.Context())
	if oauthtoken.StatusOf(err) != 401 || len(r.server.Refused()) != 1 {
		t.Fatalf("error %v, refusals %v: want the server to refuse the signature with 401", err, r.server.Refused())
	}
}
