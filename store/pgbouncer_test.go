package store_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/store/storetest"
)

// TestSuiteThroughPgBouncer runs this package's whole suite a second time
// with every store reaching Postgres through a PgBouncer in transaction
// mode (storetest.NewStore does, with ThroughPgBouncerEnv set): publish and
// fan-out, leases, records, lists, idempotency, the periodic jobs' lock and
// partitions, all without session state or named prepared statements.
func TestSuiteThroughPgBouncer(t *testing.T) {
	if os.Getenv(storetest.ThroughPgBouncerEnv) == "1" {
		// This is the second run; it does not start a third.
		return
	}
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
