package deliver

import (
	"context"
	"errors"
	"strconv"

	"github.com/google/uuid"
	"golang.org/x/sync/singleflight"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/transform"
)

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

// Transformations is a worker's Transformer: the process's sandbox and
// the programs it compiled, one per subscription version (transform's
// Cache), their code read from the store on their first attempt (once,
// however many attempts ask at the same time).
type Transformations struct {
	sandbox   Sandbox
	store     transformationStore
	programs  *transform.Cache
	compiling singleflight.Group
}

// NewTransformations is the Transformer of sandbox, reading code from st.
func NewTransformations(sandbox Sandbox, st transformationStore) *Transformations {
	return &Transformations{sandbox: sandbox, store: st, programs: transform.NewCache(sandbox, 0, 0)}
}

// Transform implements Transformer.
func (t *Transformations) Transform(ctx context.Context, subscriptionID uuid.UUID, version int, in transform.Input) (transform.Output, error) {
	key := transform.Key{Subscription: subscriptionID, Version: int64(version)}
	p, err, _ := t.compiling.Do(subscriptionID.String()+"/"+strconv.Itoa(version), func() (any, error) {
		return t.programs.Program(ctx, key, func(ctx context.Context) (string, error) { return t.code(ctx, key) })
	})
	if err != nil {
		return transform.Output{}, err
	}
	return t.sandbox.Run(ctx, p.(*transform.Program), in)
}

// code reads the code of key's version from the store.
func (t *Transformations) code(ctx context.Context, key transform.Key) (string, error) {
	tr, err := t.store.TransformationOf(ctx, key.Subscription)
	if err != nil {
		return "", err
	}
	if tr == nil || !tr.Enabled || int64(tr.Version) != key.Version {
		return "", errTransformationChanged
	}
	return tr.Code, nil
}
