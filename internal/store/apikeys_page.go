package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ListAPIKeysPage returns one page of the merchant's keys, revoked and
// expired ones included, newest first (created_at, then id, descending):
// up to p.Limit+1 keys after p.After, the extra one telling that there is
// more. A merchant webhookd does not know has none.
func (s *APIKeys) ListAPIKeysPage(ctx context.Context, merchantID string, p Page) ([]APIKey, error) {
	var afterAt *time.Time
	var afterID *uuid.UUID
	if p.After != nil {
		id, err := uuid.Parse(p.After.ID)
		if err != nil {
			return nil, fmt.Errorf("list api keys of %s: cursor id: %w", merchantID, err)
		}
		afterAt, afterID = &p.After.CreatedAt, &id
	}
	rows, err := s.pool.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys
		WHERE merchant_id = $1
		  AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3::uuid))
		ORDER BY created_at DESC, id DESC
		LIMIT $4`, merchantID, afterAt, afterID, p.Limit+1)
	if err != nil {
		return nil, fmt.Errorf("list api keys of %s: %w", merchantID, err)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (APIKey, error) { return scanAPIKey(row) })
	if err != nil {
		return nil, fmt.Errorf("list api keys of %s: %w", merchantID, err)
	}
	return keys, nil
}
