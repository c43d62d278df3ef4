package oauthtoken_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/oauthtoken"
)

// TestSecretsStayOutOfErrorsRedisAndLogs searches every error, every
// printed value and everything in Redis for the client secret, the private
// key and the tokens.
func TestSecretsStayOutOfErrorsRedisAndLogs(t *testing.T) {
	r := newRig(t)
	key, public := newKey(t, "rsa2048")
	r.server.PublicKey = public
	withSecret := r.credentials()
	withKey := r.credentials()
	withKey.ClientSecret, withKey.PrivateKey = "", key

	secrets := []string{clientSecret}
	for line := range strings.SplitSeq(key, "\n") {
		if len(line) > 20 && !strings.HasPrefix(line, "-----") {
			secrets = append(secrets, line)
		}
	}
	var seen []string
	for _, c := range []oauthtoken.Credentials{withSecret, withKey} {
		tok := tokenOf(t, r.workers[0], c)
		secrets = append(secrets, tok.AccessToken)
		var logged bytes.Buffer
		slog.New(slog.NewJSONHandler(&logged, nil)).Info("delivery", "token", tok, "credentials", c)
		seen = append(seen, fmt.Sprintf("%v %+v %#v %s", tok, tok, tok, tok), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), logged.String())
	}
	// Every way of failing: refused, server error, unreachable.
	failures := []func(){
		func() { r.server.Failing(http.StatusUnauthorized) },
		func() { r.server.Failing(http.StatusInternalServerError) },
		func() { r.server.HTTP.Close() },
	}
	for _, fail := range failures {
		fail()
		r.clock.Advance(time.Hour)
		for _, c := range []oauthtoken.Credentials{withSecret, withKey} {
			_, err := r.workers[1].Source(subscription, c).Token(t.Context())
			if err == nil {
				t.Fatal("a failing endpoint gave a token")
			}
			seen = append(seen, err.Error(), fmt.Sprintf("%+v %#v", err, err))
		}
	}
	seen = append(seen, redisDump(t, r)...)
	for i, s := range seen {
		for _, secret := range secrets {
			if at := strings.Index(s, secret); at >= 0 {
				t.Errorf("text %d shows a secret at %d: %.40q…", i, at, s)
				break
			}
		}
	}
}

// redisDump is every key in the rig's Redis and every value under it.
func redisDump(t *testing.T, r *rig) []string {
	t.Helper()
	ctx := t.Context()
	rc := r.connect()
	defer rc.Close()
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("redis keys: %v, %v", keys, err)
	}
	dump := keys
	for _, k := range keys {
		switch rc.Type(ctx, k).Val() {
		case "hash":
			for f, v := range rc.HGetAll(ctx, k).Val() {
				dump = append(dump, f, v)
			}
		case "string":
			dump = append(dump, rc.Get(ctx, k).Val())
		default:
			t.Errorf("unexpected key %s", k)
		}
	}
	return dump
}
