package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store"
)

// TestUnreachable: what a request answers as a backing service to retry
// (upstream_error, with Retry-After) rather than an internal error.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"a dial error", fmt.Errorf("get merchant: %w", dial), true},
		{"a deadline", fmt.Errorf("get merchant: %w", context.DeadlineExceeded), true},
		{"a closed Redis client", redis.ErrClosed, true},
		// What pgx reports for a pooled connection that a restart of
		// Postgres or PgBouncer cut (store's TestPoolRecoversFromPgBouncerRestart).
		{"a Postgres connection cut by a restart", fmt.Errorf("get merchant: %w", pgconn.ErrConnClosed), true},
		{"a row that is not there", store.ErrNotFound, false},
		{"a lost race", store.ErrConflict, false},
		{"a server's refusal", &pgconn.PgError{Code: "23505"}, false},
		{"anything else", errors.New("boom"), false},
	}
	for _, c := range cases {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("%s (%v): unreachable = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
