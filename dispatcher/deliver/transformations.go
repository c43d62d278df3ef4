package deliver

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/transform"
)

// maxCachedPrograms bounds the compiled transformations a worker keeps:
// one per subscription version in use, each its bytecode (the code is at
// most 64 KiB).
const maxCachedPrograms = 1024

// errTransformationChanged is a transformation changed or removed since
// the attempt's lease read its version: the attempt runs again with a
// fresh lease, which reads the new one.
var errTransformationChanged = errors.New("the transformation changed since the lease")

// transformationStore is what the worker's transformer reads of the
// database.
type transformationStore interface {
	// TransformationOf reads a subscription's transformation; nil for
	// none.
	TransformationOf(ctx context.Context, id uuid.UUID) (*store.Transformation, error)
}

// Sandbox compiles and runs transformations (internal/transform's
// Sandbox, or its Lazy).
type Sandbox interface {
	// Compile compiles code; a *transform.Error says where it fails.
	Compile(ctx context.Context, code string) (*transform.Program, error)
	// Run runs p's handler on in.
	Run(ctx context.Context, p *transform.Program, in transform.Input) (transform.Output, error)
}

// programKey names a compiled transformation: a subscription's version.
type programKey struct {
	subscription uuid.UUID
	version      int
}

// Transformations is a worker's Transformer: the process's sandbox and
// the programs it compiled, one per subscription version, read from the
// store and compiled on their first attempt (once, however many attempts
// ask at the same time), then kept.
type Transformations struct {
	sandbox   Sandbox
	store     transformationStore
	programs  *lru.Cache[programKey, *transform.Program]
	compiling singleflight.Group
}

// NewTransformations is the Transformer of sandbox, reading code from st.
func NewTransformations(sandbox Sandbox, st transformationStore) (*Transformations, error) {
	programs, err := lru.New[programKey, *transform.Program](maxCachedPrograms)
	if err != nil {
		return nil, fmt.Errorf("transformations: %w", err)
	}
	return &Transformations{sandbox: sandbox, store: st, programs: programs}, nil
}

// Transform implements Transformer.
func (t *Transformations) Transform(ctx context.Context, subscriptionID uuid.UUID, version int, in transform.Input) (transform.Output, error) {
	p, err := t.program(ctx, programKey{subscription: subscriptionID, version: version})
	if err != nil {
		return transform.Output{}, err
	}
	return t.sandbox.Run(ctx, p, in)
}

// program is the compiled version k: kept, or read and compiled now. A
// code that does not compile (saved by an older build's rules) is a
// *transform.Error, not kept.
func (t *Transformations) program(ctx context.Context, k programKey) (*transform.Program, error) {
	if p, ok := t.programs.Get(k); ok {
		return p, nil
	}
	v, err, _ := t.compiling.Do(k.subscription.String()+"/"+strconv.Itoa(k.version), func() (any, error) {
		tr, err := t.store.TransformationOf(ctx, k.subscription)
		if err != nil {
			return nil, err
		}
		if tr == nil || !tr.Enabled || tr.Version != k.version {
			return nil, errTransformationChanged
		}
		p, err := t.sandbox.Compile(ctx, tr.Code)
		if err != nil {
			return nil, err
		}
		t.programs.Add(k, p)
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*transform.Program), nil
}
