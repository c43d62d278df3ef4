package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ColumnsHolding lists, as table.column, every text, bytea, json or array
// column of the public schema's tables that holds needle in some row
// (partitioned tables are read through their parents): the proof that
// erased content is nowhere in the database, whatever column a later
// migration adds.
func ColumnsHolding(t testing.TB, pool *pgxpool.Pool, needle string) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
		SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
		JOIN pg_class k ON k.relname = c.table_name AND k.relkind IN ('r', 'p') AND NOT k.relispartition
		JOIN pg_namespace n ON n.oid = k.relnamespace AND n.nspname = c.table_schema
		WHERE c.table_schema = 'public'
		  AND c.data_type IN ('text', 'bytea', 'jsonb', 'json', 'ARRAY', 'character varying')
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatalf("storetest: list columns: %v", err)
	}
	type column struct{ table, name, typ string }
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		return c, r.Scan(&c.table, &c.name, &c.typ)
	})
	if err != nil {
		t.Fatalf("storetest: list columns: %v", err)
	}
	var found []string
	for _, c := range cols {
		expr, arg := pgx.Identifier{c.name}.Sanitize()+"::text", any(needle)
		if c.typ == "bytea" {
			expr, arg = pgx.Identifier{c.name}.Sanitize(), []byte(needle)
		}
		q := fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s WHERE position($1 IN %s) > 0)`, pgx.Identifier{c.table}.Sanitize(), expr)
		var holds bool
		if err := pool.QueryRow(ctx, q, arg).Scan(&holds); err != nil {
			t.Fatalf("storetest: scan %s.%s: %v", c.table, c.name, err)
		}
		if holds {
			found = append(found, c.table+"."+c.name)
		}
	}
	return found
}
