package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// Transformation is a subscription's transformation: the merchant's
// JavaScript handler that reshapes each delivery before it is sent
// (docs/transformations.md). The store keeps it as given; package
// subscriptions checks it before it is stored.
type Transformation struct {
	// Code is the handler's source.
	Code string
	// Enabled says whether deliveries run it; false keeps the code
	// without running it.
	Enabled bool
	// Version counts the code's changes, 1 for the first: a compiled
	// program is cached per version, and each attempt records the
	// version that ran.
	Version int
}

// transformationColumns are the three columns of a Transformation as
// scanned: code NULL for none.
type transformationColumns struct {
	code    *string
	enabled bool
	version int
}

func (t transformationColumns) value() *Transformation {
	if t.code == nil {
		return nil
	}
	return &Transformation{Code: *t.code, Enabled: t.enabled, Version: t.version}
}

// targets are the scan targets of the three columns, in
// transformationSelect's order.
func (t *transformationColumns) targets() []any { return []any{&t.code, &t.enabled, &t.version} }

// leasedTransformation is what a lease reads of the subscription's
// transformation (table alias s): the version turned on, NULL for none.
const leasedTransformation = `CASE WHEN s.transformation_enabled THEN s.transformation_version END`

// transformationArgs are a Transformation's code and enabled values for
// an insert or update; nil code for none.
func transformationArgs(t *Transformation) (code *string, enabled bool) {
	if t == nil {
		return nil, false
	}
	return &t.Code, t.Enabled
}

// TransformationOf reads a subscription's transformation, as it is now
// (deleted subscriptions included: their last attempts may still run);
// nil when it has none.
func (s *Subscriptions) TransformationOf(ctx context.Context, id uuid.UUID) (*Transformation, error) {
	var t transformationColumns
	err := s.pool.QueryRow(ctx, `SELECT transformation_code, transformation_enabled, transformation_version
		FROM subscriptions WHERE id = $1`, id).Scan(t.targets()...)
	if err != nil {
		return nil, fmt.Errorf("transformation of subscription %s: %w", id, notFound(err))
	}
	return t.value(), nil
}
