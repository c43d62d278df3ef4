package oauthtoken_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/oauthtoken"
)

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rc.Close() })
	ok := oauthtoken.Config{Redis: rc, HTTP: http.DefaultClient, MasterKey: masterKey()}
	with := func(change func(*oauthtoken.Config)) oauthtoken.Config {
		c := ok
		change(&c)
		return c
	}
	cases := map[string]oauthtoken.Config{
		"no Redis":            with(func(c *oauthtoken.Config) { c.Redis = nil }),
		"no HTTP client":      with(func(c *oauthtoken.Config) { c.HTTP = nil }),
		"a short master key":  with(func(c *oauthtoken.Config) { c.MasterKey = c.MasterKey[:16] }),
		"a negative duration": with(func(c *oauthtoken.Config) { c.LockTTL = -time.Second }),
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := oauthtoken.New(cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := oauthtoken.New(ok); err != nil {
		t.Fatalf("refused a complete config: %v", err)
	}
}
