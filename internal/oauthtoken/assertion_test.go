package oauthtoken_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/keybounds"
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

// TestStoredOversizedKeyIsNeverUsed: credentials stored by an older build
// with an RSA key beyond keybounds (4,608 bits here) are refused when a
// token is fetched, before any assertion is signed or any request sent,
// with the rule (key_size) in the error; Validate refuses them with it.
func TestStoredOversizedKeyIsNeverUsed(t *testing.T) {
	big, err := os.ReadFile("../keybounds/testdata/rsa4608.pem")
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t)
	creds := r.credentials()
	creds.ClientSecret, creds.PrivateKey = "", string(big)
	if e := invalid.As(creds.Validate()); e == nil || e.Param != "private_key" || e.Rule != keybounds.CodeKeySize {
		t.Fatalf("Validate = %v, want key_size on private_key", creds.Validate())
	}
	// Every worker, each time, is told the key is refused: the refusal is
	// not shared as the token endpoint's failure (which would lose its
	// kind for the attempts of the next seconds).
	for i := range 2 {
		for _, w := range r.workers {
			_, err = w.Source(subscription, creds).Token(t.Context())
			if !errors.Is(err, keybounds.ErrKeyNotAccepted) || strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Fatalf("Token (round %d) = %v, want the key refused by its bounds", i+1, err)
			}
		}
	}
	if n := r.server.Requests(); n != 0 {
		t.Errorf("%d token requests, want none", n)
	}
}
