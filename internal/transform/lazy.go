package transform

import (
	"context"
	"sync"
)

// Lazy is a Sandbox made on its first use: compiling the engine costs
// about a second of CPU (many under the race detector), which a process
// that runs no transformation, or has not yet, does not pay at start. It
// is safe for concurrent use.
type Lazy struct {
	cfg     Config
	mu      sync.Mutex
	sandbox *Sandbox
}

// NewLazy is the Lazy sandbox of cfg.
func NewLazy(cfg Config) *Lazy { return &Lazy{cfg: cfg} }

// get is the sandbox, made now if it was not; a failure is returned and
// tried again at the next use.
func (l *Lazy) get(ctx context.Context) (*Sandbox, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sandbox == nil {
		s, err := New(ctx, l.cfg)
		if err != nil {
			return nil, err
		}
		l.sandbox = s
	}
	return l.sandbox, nil
}

// Compile is Sandbox.Compile.
func (l *Lazy) Compile(ctx context.Context, code string) (*Program, error) {
	s, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.Compile(ctx, code)
}

// Run is Sandbox.Run.
func (l *Lazy) Run(ctx context.Context, p *Program, in Input) (Output, error) {
	s, err := l.get(ctx)
	if err != nil {
		return Output{}, err
	}
	return s.Run(ctx, p, in)
}

// Close releases the sandbox, if it was made.
func (l *Lazy) Close(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sandbox == nil {
		return nil
	}
	err := l.sandbox.Close(ctx)
	l.sandbox = nil
	return err
}
