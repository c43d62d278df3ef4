package filter

import (
	"sync"
	"time"

	"github.com/google/uuid"
)

// maxCached bounds a Cache; past it, the whole cache is dropped and built
// again as events come: simpler than an LRU, and a compile costs only
// tens of microseconds.
const maxCached = 10_000

// Cache keeps each subscription's compiled filter, so that a fan-out
// compiles an expression once, not once per event. An entry is keyed by
// the subscription and its version (updated_at), which every change of
// the filter moves: a changed filter is compiled again at its next event.
type Cache struct {
	compiler *Compiler
	mu       sync.Mutex
	programs map[uuid.UUID]cached
}

type cached struct {
	version time.Time
	prg     *Program
	err     error
}

// NewCache is an empty cache compiling with c.
func NewCache(c *Compiler) *Cache {
	return &Cache{compiler: c, programs: make(map[uuid.UUID]cached)}
}

// Program returns the compiled filter of subscription id at version. An
// expression that no longer compiles (stored by an older build with other
// rules) returns its error every time: the caller delivers nothing.
func (c *Cache) Program(id uuid.UUID, version time.Time, expr string) (*Program, error) {
	c.mu.Lock()
	e, ok := c.programs[id]
	c.mu.Unlock()
	if ok && e.version.Equal(version) {
		return e.prg, e.err
	}
	prg, err := c.compiler.Compile(expr)
	c.mu.Lock()
	if len(c.programs) >= maxCached {
		c.programs = make(map[uuid.UUID]cached)
	}
	c.programs[id] = cached{version: version, prg: prg, err: err}
	c.mu.Unlock()
	return prg, err
}
