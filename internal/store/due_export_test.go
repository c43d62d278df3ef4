package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// ExplainDueDeliveries runs DueDeliveries' statement under EXPLAIN
// ANALYZE, planned as the engine plans it: generic (store.go). An EXPLAIN
// sent with parameters is planned with their values, as a custom plan
// would be; so the statement is prepared, and its generic plan explained.
func (s *Store) ExplainDueDeliveries(ctx context.Context, dueBefore, now time.Time, after *DuePosition, limit int) (ExplainedLease, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return ExplainedLease{}, err
	}
	defer conn.Release()
	var plan string
	err = func() error {
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, `PREPARE explained_due (timestamptz, timestamptz, timestamptz, uuid, int) AS `+dueSQL); err != nil {
			return err
		}
		defer conn.Exec(ctx, `DEALLOCATE explained_due; RESET plan_cache_mode`) //nolint:errcheck // the connection is released either way
		// EXECUTE takes no protocol parameters: its arguments are literals.
		var lits []string
		for _, a := range dueArgs(dueBefore, now, after, limit) {
			switch v := a.(type) {
			case time.Time:
				lits = append(lits, "'"+v.Format(time.RFC3339Nano)+"'")
			case pgtype.Timestamptz:
				switch {
				case !v.Valid:
					lits = append(lits, "NULL")
				case v.InfinityModifier == pgtype.NegativeInfinity:
					lits = append(lits, "'-infinity'")
				default:
					lits = append(lits, "'"+v.Time.Format(time.RFC3339Nano)+"'")
				}
			case uuid.UUID:
				lits = append(lits, "'"+v.String()+"'")
			case *uuid.UUID:
				if v == nil {
					lits = append(lits, "NULL")
				} else {
					lits = append(lits, "'"+v.String()+"'")
				}
			default:
				lits = append(lits, fmt.Sprint(v))
			}
		}
		return conn.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE explained_due(`+strings.Join(lits, ", ")+`)`).Scan(&plan)
	}()
	if err != nil {
		return ExplainedLease{}, fmt.Errorf("explain due deliveries: %w", err)
	}
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
		return ExplainedLease{}, fmt.Errorf("read plan: %v\n%s", err, plan)
	}
	return ExplainedLease{RowsRead: doc[0].Plan.rowsRead(), Plan: plan}, nil
}
