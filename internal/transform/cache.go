package transform

import (
	"container/list"
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"
)

// Default bounds of a Cache.
const (
	DefaultCacheEntries = 10_000
	DefaultCacheBytes   = 64 << 20
)

// Key names a subscription's transformation at one version: every change
// of the code moves the version, so a changed code is compiled again at
// its next run.
type Key struct {
	Subscription uuid.UUID
	Version      int64
}

// Cache keeps compiled programs, so that a delivery compiles its
// subscription's code once per version, not once per attempt. It holds
// one entry per subscription (a new version replaces the old) and evicts
// the least recently used past its bounds: a number of entries and the
// bytes of their bytecode. A code that does not compile is kept too, with
// its *Error, so that its retries do not run its top level again.
type Cache struct {
	sandbox    compiler
	maxEntries int
	maxBytes   int

	mu      sync.Mutex
	bytes   int
	order   *list.List // of *cached, most recently used first
	entries map[uuid.UUID]*list.Element
}

type cached struct {
	key     Key
	program *Program
	err     *Error
}

// compiler compiles code: a Sandbox, or a Lazy one.
type compiler interface {
	Compile(ctx context.Context, code string) (*Program, error)
}

// NewCache is an empty cache compiling with s (a *Sandbox or a *Lazy);
// zero bounds take the defaults.
func NewCache(s compiler, maxEntries, maxBytes int) *Cache {
	if maxEntries <= 0 {
		maxEntries = DefaultCacheEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{sandbox: s, maxEntries: maxEntries, maxBytes: maxBytes,
		order: list.New(), entries: make(map[uuid.UUID]*list.Element)}
}

// Program returns the compiled code of key, reading its code (code) and
// compiling it only when the cache has no entry for that version: a hit
// reads nothing. Errors are code's and Compile's; only an *Error is kept.
func (c *Cache) Program(ctx context.Context, key Key, code func(context.Context) (string, error)) (*Program, error) {
	if e, ok := c.get(key); ok {
		if e.err != nil {
			return nil, e.err
		}
		return e.program, nil
	}
	text, err := code(ctx)
	if err != nil {
		return nil, err
	}
	p, err := c.sandbox.Compile(ctx, text)
	var te *Error
	switch {
	case errors.As(err, &te):
		c.put(&cached{key: key, err: te})
	case err == nil:
		c.put(&cached{key: key, program: p})
	}
	return p, err
}

// Len is how many entries the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *Cache) get(key Key) (*cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key.Subscription]
	if !ok || el.Value.(*cached).key != key {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cached), true
}

func (c *Cache) put(e *cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[e.key.Subscription]; ok {
		c.remove(old)
	}
	c.entries[e.key.Subscription] = c.order.PushFront(e)
	c.bytes += e.size()
	for c.order.Len() > c.maxEntries || (c.bytes > c.maxBytes && c.order.Len() > 1) {
		c.remove(c.order.Back())
	}
}

func (c *Cache) remove(el *list.Element) {
	e := c.order.Remove(el).(*cached)
	delete(c.entries, e.key.Subscription)
	c.bytes -= e.size()
}

func (e *cached) size() int {
	if e.program == nil {
		return 0
	}
	return e.program.Size()
}
