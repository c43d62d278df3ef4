package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestUUIDParameters sends uuid.UUID values in every shape the store's
// statements take them (a value, a pointer, a nil pointer, a slice for a
// uuid array) with prepared statements and with the simple protocol a
// transaction-mode pooler needs, and reads back what Postgres received;
// a NULL uuid still scans as the zero UUID.
func TestUUIDParameters(t *testing.T) {
	ctx := context.Background()
	db := storetest.NewDatabase(t)
	a, b := uuid.New(), uuid.New()
	for _, mode := range []struct{ name, query string }{
		{"prepared statements", ""},
		{"simple protocol", "&default_query_exec_mode=simple_protocol"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			s, err := store.Open(ctx, db+mode.query)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			cases := []struct {
				name  string
				param any
				cast  string
				want  string
			}{
				{"a value", a, "uuid", a.String()},
				{"a pointer", &b, "uuid", b.String()},
				{"a nil pointer", (*uuid.UUID)(nil), "uuid", "NULL"},
				{"a slice", []uuid.UUID{a, b}, "uuid[]", "{" + a.String() + "," + b.String() + "}"},
				{"an empty slice", []uuid.UUID{}, "uuid[]", "{}"},
			}
			for _, c := range cases {
				var got string
				if err := s.Pool().QueryRow(ctx, "SELECT coalesce($1::"+c.cast+"::text, 'NULL')", c.param).Scan(&got); err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if got != c.want {
					t.Errorf("%s: Postgres received %s, want %s", c.name, got, c.want)
				}
			}
			var back, null uuid.UUID
			if err := s.Pool().QueryRow(ctx, "SELECT $1::uuid, NULL::uuid", a).Scan(&back, &null); err != nil {
				t.Fatal(err)
			}
			if back != a || null != uuid.Nil {
				t.Errorf("scanned %s and %s, want %s and the zero UUID", back, null, a)
			}
		})
	}
}

// TestUUIDParameterEncodesItsBytes holds the store's connections to
// encoding a uuid.UUID from its 16 bytes: through its driver.Valuer pgx
// formatted it as text, failed to encode that in binary, built the error,
// parsed the text back and encoded the result, a dozen allocations a
// parameter (20 with pgx's default type map).
func TestUUIDParameterEncodesItsBytes(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewStore(t)
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	types := conn.Conn().TypeMap()
	u := uuid.New()
	buf := make([]byte, 0, 64)
	encoded, err := types.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, u, buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(encoded) != string(u[:]) {
		t.Fatalf("encoded %x, want the UUID's bytes %x", encoded, u[:])
	}
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = types.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, u, buf[:0])
	})
	// Two: the UUID boxed for Encode's argument, and again for the
	// encoder's UUIDValuer.
	if allocs > 2 {
		t.Errorf("encoding a uuid.UUID parameter allocates %.0f times, want at most twice (boxing its bytes)", allocs)
	}
	if plan := fmt.Sprintf("%T", types.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, u)); strings.Contains(plan, "DriverValuer") {
		t.Errorf("a uuid.UUID parameter is encoded by %s, want pgxuuid's byte encoder", plan)
	}
}
