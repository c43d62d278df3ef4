package store_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestSuiteThroughPgBouncer runs this package's whole suite a second time
// with every store reaching Postgres through a PgBouncer in transaction
// mode (storetest.NewStore does, with ThroughPgBouncerEnv set): publish and
// fan-out, leases, records, lists, idempotency, the periodic jobs' lock and
// partitions, all without session state or named prepared statements.
func TestSuiteThroughPgBouncer(t *testing.T) {
	storetest.FullLane(t, "the store suite again through PgBouncer")
	if os.Getenv(storetest.ThroughPgBouncerEnv) == "1" {
		// This is the second run; it does not start a third.
		return
	}
	// Beside the package's other parallel tests: the second run is a
	// process of its own, on databases of its own, and took two minutes of
	// CI's run alone.
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.count=1", "-test.v", "-test.skip=^TestSuiteThroughPgBouncer$")
	cmd.Env = append(os.Environ(), storetest.ThroughPgBouncerEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the store suite through PgBouncer failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestLeaseIsExclusivePerAttempt") {
		t.Fatalf("the suite through PgBouncer did not run the store's tests:\n%s", out)
	}
}

// TestPoolRecoversFromPgBouncerRestart: a PgBouncer restart cuts every
// pooled connection. The pool hands out a connection used in the last
// second without pinging it, so a statement may meet a cut one: it fails
// with an error ConnectionLost recognises (the API answers it as a backing
// service to retry, not as an internal error), and the next statement runs
// on a new connection, without reopening the store.
func TestPoolRecoversFromPgBouncerRestart(t *testing.T) {
	storetest.FullLane(t, "PgBouncer")
	t.Parallel()
	ctx := t.Context()
	bouncer := storetest.NewPgBouncer(t, storetest.NewDatabase(t))
	s, err := store.Open(ctx, bouncer.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	lookUp := func() error {
		_, _, err := s.Events.MerchantWithFilters(ctx, "m_unknown", "payout.paid")
		return err
	}
	// A restart slower than the pool's one second of trust would have the
	// pool ping the connection first: try again on a loaded machine.
	for try := 0; ; try++ {
		if err := lookUp(); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("before the restart: %v, want ErrNotFound", err)
		}
		used := time.Now()
		bouncer.Stop()
		bouncer.Start()
		if time.Since(used) > 800*time.Millisecond && try < 5 {
			continue
		}
		err := lookUp()
		if !store.ConnectionLost(err) {
			t.Fatalf("a statement on a connection the restart cut: %v, want an error ConnectionLost recognises", err)
		}
		break
	}
	for i := range 3 {
		if err := lookUp(); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("statement %d after the cut connection: %v, want ErrNotFound from a new connection", i+1, err)
		}
	}
	for _, err := range []error{store.ErrNotFound, store.ErrConflict, errors.New("boom")} {
		if store.ConnectionLost(err) {
			t.Errorf("ConnectionLost(%v) = true", err)
		}
	}
}
