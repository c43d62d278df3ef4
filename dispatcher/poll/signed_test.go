package poll

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/deliver"
)

// TestSignedCacheBounds: an item is served for signedTTL after its
// signing and not after (nor before it, on a clock set back); the items
// kept never hold more than signedMaxBytes, the least recently used going
// first; an item signed again replaces its bytes rather than adding them.
func TestSignedCacheBounds(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := func() signedKey { return signedKey{subscription: uuid.New(), delivery: uuid.New(), version: at} }
	item := func(n int) deliver.Polled {
		return deliver.Polled{Body: bytes.Repeat([]byte("x"), n), Signature: "v1,sig"}
	}

	t.Run("age", func(t *testing.T) {
		c := newSignedCache()
		k := key()
		c.put(k, item(10), at)
		for _, tc := range []struct {
			name string
			now  time.Time
			kept bool
		}{
			{"at its signing", at, true},
			{"just under the TTL", at.Add(signedTTL - time.Millisecond), true},
			{"at the TTL", at.Add(signedTTL), false},
			{"before its signing", at.Add(-time.Second), false},
		} {
			if _, ok := c.get(k, tc.now); ok != tc.kept {
				t.Errorf("%s: served %v, want %v", tc.name, ok, tc.kept)
			}
		}
	})
	t.Run("bytes", func(t *testing.T) {
		c := newSignedCache()
		const each = signedMaxBytes / 4
		var keys []signedKey
		for range 6 {
			k := key()
			keys = append(keys, k)
			c.put(k, item(each), at)
			if c.bytes > signedMaxBytes {
				t.Fatalf("%d bytes kept, bound %d", c.bytes, signedMaxBytes)
			}
		}
		if _, ok := c.get(keys[0], at); ok {
			t.Error("the least recently used item outlived the bytes bound")
		}
		if _, ok := c.get(keys[5], at); !ok {
			t.Error("the last item signed was not kept")
		}
		c.put(keys[5], item(10), at)
		c.put(keys[5], item(10), at)
		if _, ok := c.get(keys[5], at); !ok || c.bytes != c.bytesOfAll() {
			t.Errorf("bytes %d after replacing an item, want %d", c.bytes, c.bytesOfAll())
		}
	})
}

// bytesOfAll adds up the sizes of the items kept.
func (c *signedCache) bytesOfAll() int {
	n := 0
	for _, k := range c.items.Keys() {
		v, _ := c.items.Peek(k)
		n += v.size()
	}
	return n
}
