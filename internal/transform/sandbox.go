// Package transform runs a merchant's transformation: a JavaScript
// function handler(webhook) that reshapes a delivery (its payload, url and
// headers) or cancels it, in a sandbox that bounds its CPU time and memory
// and gives it no way out but its return value (docs/transformations.md;
// the choice of engine: docs/decisions.md, "Transformations: the
// sandbox").
//
// The engine is QuickJS compiled to WebAssembly (engine/), run by wazero:
// each call gets a fresh instance, so no state survives a call.
package transform

import (
	"context"
	"fmt"

	"github.com/webhookd/webhookd/internal/clock"
)

// Config is a Sandbox's settings.
type Config struct {
	// Limits bound each call; zero fields take their defaults.
	Limits Limits
	// CheckURL judges a url a transformation returns, by the subscription
	// URL rules (scheme, SSRF guard); its error's text is shown to the
	// merchant when it is an *invalid.Error. Nil: no transformation may
	// change the url.
	CheckURL func(string) error
	// Clock is what the script's Date reads, and what times a call.
	// Default the system clock.
	Clock clock.Clock
}

// Sandbox compiles and runs transformations. It is safe for concurrent
// use; each call runs on the calling goroutine.
type Sandbox struct {
	limits   Limits
	checkURL func(string) error
	clock    clock.Clock
	engine   *engine
}

// New compiles the engine (about half a second, once per process).
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	l := cfg.Limits.withDefaults()
	if err := l.validate(); err != nil {
		return nil, fmt.Errorf("transform: %w", err)
	}
	clk := clock.Or(cfg.Clock)
	e, err := newEngine(ctx, l, clk)
	if err != nil {
		return nil, err
	}
	return &Sandbox{limits: l, checkURL: cfg.CheckURL, clock: clk, engine: e}, nil
}

// Limits are the limits in force, defaults filled in.
func (s *Sandbox) Limits() Limits { return s.limits }

// Close releases the engine.
func (s *Sandbox) Close(ctx context.Context) error { return s.engine.close(ctx) }
