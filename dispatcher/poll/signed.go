package poll

import (
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/webhookd/webhookd/dispatcher/deliver"
)

// Bounds of the signing work of reads (docs/decisions.md, "A merchant's
// input", rule 3). A read signs each item it returns, and encrypts it when
// the subscription has an encryption key (an ECDH or RSA operation per
// item); a merchant reading the same page again and again, or going back
// with since over what it has acknowledged, would make the engine do that
// work in a loop, outside any share.
const (
	// signedTTL is how long a signed item is served again as it was
	// signed: its webhook-timestamp is then at most this old, well within
	// the five minutes receivers accept.
	signedTTL = time.Minute
	// signedMaxItems and signedMaxBytes bound the signed items kept.
	signedMaxItems = 4096
	signedMaxBytes = 32 << 20
	// MaxCostlySignings is how many items a read signs afresh when
	// signing one is costly (an encryption, or an Ed25519 signature):
	// past it the page ends early, its Done false and its iterator after
	// the last item returned, and the next read goes on.
	MaxCostlySignings = 50
)

// signedKey names one signed item: the delivery, and the subscription's
// version (its updated_at), which changes with its keys, its encryption
// key and its payload style, so that a change signs afresh.
type signedKey struct {
	subscription, delivery uuid.UUID
	version                time.Time
}

// signedItem is a signed item and when it was signed.
type signedItem struct {
	signed deliver.Polled
	at     time.Time
}

// size is about what the item holds in memory.
func (s signedItem) size() int {
	return len(s.signed.Body) + len(s.signed.ContentType) + len(s.signed.ID) + len(s.signed.Timestamp) +
		len(s.signed.Signature) + 128
}

// signedCache keeps recently signed items, bounded in number, in bytes and
// in age, so that reading a page again costs no signing.
type signedCache struct {
	mu    sync.Mutex
	items *simplelru.LRU[signedKey, signedItem]
	bytes int
}

func newSignedCache() *signedCache {
	c := &signedCache{}
	// The callback runs inside the LRU's calls, under mu.
	c.items, _ = simplelru.NewLRU(signedMaxItems, func(_ signedKey, v signedItem) { c.bytes -= v.size() })
	return c
}

// get is the item signed for k, unless it was signed signedTTL or more
// before now.
func (c *signedCache) get(k signedKey, now time.Time) (deliver.Polled, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.items.Get(k)
	if !ok || now.Sub(v.at) >= signedTTL || now.Before(v.at) {
		return deliver.Polled{}, false
	}
	return v.signed, true
}

// put keeps signed, made for k at at, and drops the least recently used
// items beyond the bytes bound.
func (c *signedCache) put(k signedKey, signed deliver.Polled, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := signedItem{signed: signed, at: at}
	if v.size() > signedMaxBytes {
		return
	}
	c.items.Remove(k) // an expired one: its bytes go with it
	c.items.Add(k, v)
	c.bytes += v.size()
	for c.bytes > signedMaxBytes {
		c.items.RemoveOldest()
	}
}
