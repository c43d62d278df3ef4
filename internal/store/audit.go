package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Audit owns the audit trail of what compliance asks about: erasures and
// retention changes, written in the transaction of the change they record
// and read through the internal API.
type Audit struct {
	db
}

// The actions the audit trail records.
const (
	// AuditEventErased is an event's content erased (target: the event id).
	AuditEventErased = "event.erased"
	// AuditRetentionChanged is a merchant's retention changed (target: the
	// merchant id; details: from and to, in days).
	AuditRetentionChanged = "merchant.retention_changed"
)

// AuditEntry is one line of the audit trail.
type AuditEntry struct {
	ID         uuid.UUID
	MerchantID string
	// Actor is who made the change: "internal" (the ingest token's holder,
	// with the name it gave, if any) or a merchant's API key id.
	Actor  string
	Action string
	Target string
	// Details say what changed; never content.
	Details   map[string]any
	CreatedAt time.Time
}

// insertAudit writes e in q (the change's transaction); e.ID is made here.
func insertAudit(ctx context.Context, q querier, e AuditEntry) error {
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("audit entry: %w", err)
	}
	details, err := json.Marshal(e.Details)
	if err != nil {
		return fmt.Errorf("audit entry: %w", err)
	}
	if _, err := q.Exec(ctx, `
		INSERT INTO audit_entries (id, merchant_id, actor, action, target, details, created_at)
		VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7)`,
		id, e.MerchantID, e.Actor, e.Action, e.Target, string(details), e.CreatedAt); err != nil {
		return fmt.Errorf("audit entry: %w", err)
	}
	return nil
}

// ListAudit returns one page of the merchant's audit trail, newest first
// (created_at, then id, descending): up to p.Limit+1 entries after
// p.After, the extra one telling that there is more.
func (s *Audit) ListAudit(ctx context.Context, merchantID string, p Page) ([]AuditEntry, error) {
	var afterAt *time.Time
	var afterID *uuid.UUID
	if p.After != nil {
		id, err := uuid.Parse(p.After.ID)
		if err != nil {
			return nil, fmt.Errorf("list audit of %s: cursor id: %w", merchantID, err)
		}
		afterAt, afterID = &p.After.CreatedAt, &id
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id, merchant_id, actor, action, target, details, created_at FROM audit_entries
		WHERE merchant_id = $1
		  AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3::uuid))
		ORDER BY created_at DESC, id DESC
		LIMIT $4`, merchantID, afterAt, afterID, p.Limit+1)
	if err != nil {
		return nil, fmt.Errorf("list audit of %s: %w", merchantID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := row.Scan(&e.ID, &e.MerchantID, &e.Actor, &e.Action, &e.Target, &e.Details, &e.CreatedAt)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit of %s: %w", merchantID, err)
	}
	return out, nil
}
