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

// ExplainedPlan is what Postgres did to run one statement.
type ExplainedPlan struct {
	// RowsRead counts the rows the plan's scans read, table rows and the
	// entries of bitmap index scans alike, whether they matched or not.
	RowsRead int
	// WholeIndexes names the indexes the plan may read whole (an index
	// scan with no index condition), whether it did or not: what it reads
	// depends on what the index holds, not on what the statement asks.
	WholeIndexes []string
	// Plan is the EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) output, for
	// messages.
	Plan string
}

// explainGeneric runs a statement under EXPLAIN ANALYZE planned as the
// engine plans it: generic (store.go). An EXPLAIN sent with parameters is
// planned with their values, as a custom plan would be; so the statement
// is prepared with its parameters' types, and its generic plan explained,
// in a transaction rolled back: what it writes is not kept.
func (s *Store) explainGeneric(ctx context.Context, types, sql string, args ...any) (ExplainedPlan, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return ExplainedPlan{}, err
	}
	defer conn.Release()
	var plan string
	err = func() error {
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, `PREPARE explained (`+types+`) AS `+sql); err != nil {
			return err
		}
		defer conn.Exec(ctx, `DEALLOCATE explained; RESET plan_cache_mode`) //nolint:errcheck // the connection is released either way
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) //nolint:errcheck // nothing to keep
		// EXECUTE takes no protocol parameters: its arguments are literals.
		lits := make([]string, len(args))
		for i, a := range args {
			lits[i] = sqlLiteral(a)
		}
		return tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE explained(`+strings.Join(lits, ", ")+`)`).Scan(&plan)
	}()
	if err != nil {
		return ExplainedPlan{}, fmt.Errorf("explain: %w", err)
	}
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
		return ExplainedPlan{}, fmt.Errorf("read plan: %v\n%s", err, plan)
	}
	return ExplainedPlan{RowsRead: doc[0].Plan.rowsRead(), WholeIndexes: doc[0].Plan.wholeIndexes(), Plan: plan}, nil
}

// sqlLiteral writes a statement's argument as an SQL literal.
func sqlLiteral(a any) string {
	quoted := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	// An array is one literal of unknown type, '{"a","b"}', which takes
	// the parameter's type (ARRAY['a'] would be text[]).
	array := func(n int, item func(int) string) string {
		items := make([]string, n)
		for i := range items {
			items[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(item(i)) + `"`
		}
		return quoted("{" + strings.Join(items, ",") + "}")
	}
	switch v := a.(type) {
	case time.Time:
		return quoted(v.Format(time.RFC3339Nano))
	case pgtype.Timestamptz:
		switch {
		case !v.Valid:
			return "NULL"
		case v.InfinityModifier == pgtype.NegativeInfinity:
			return "'-infinity'"
		default:
			return quoted(v.Time.Format(time.RFC3339Nano))
		}
	case uuid.UUID:
		return quoted(v.String())
	case *uuid.UUID:
		if v == nil {
			return "NULL"
		}
		return quoted(v.String())
	case []uuid.UUID:
		return array(len(v), func(i int) string { return v[i].String() })
	case []string:
		return array(len(v), func(i int) string { return v[i] })
	case []time.Time:
		return array(len(v), func(i int) string { return v[i].Format(time.RFC3339Nano) })
	case []*time.Time:
		items := make([]string, len(v))
		for i, t := range v {
			items[i] = "NULL"
			if t != nil {
				items[i] = `"` + t.Format(time.RFC3339Nano) + `"`
			}
		}
		return quoted("{" + strings.Join(items, ",") + "}")
	case []int32:
		return array(len(v), func(i int) string { return fmt.Sprint(v[i]) })
	case []int64:
		return array(len(v), func(i int) string { return fmt.Sprint(v[i]) })
	default:
		return fmt.Sprint(v)
	}
}

// rowsRead is rowsExamined counting the entries a bitmap index scan reads
// too: ANDed with another index, a bitmap scan can read a whole index and
// still return one row.
func (n planNode) rowsRead() int {
	return n.rowsOf("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Bitmap Index Scan")
}
