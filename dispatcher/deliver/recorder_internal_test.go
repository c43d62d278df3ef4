package deliver

import "testing"

// TestRecordsWaitInAnEighthOfThePool: records waiting for company hold at
// most an eighth of the pool's slots, and none wait in a pool of under 16.
func TestRecordsWaitInAnEighthOfThePool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ pool, below int }{
		{0, recordLingerBelow}, // a recorder without a pool (tests, tools)
		{4, 0},
		{15, 1},
		{16, 2},
		{64, 8},
		{256, 32},
		{1024, 32},
	} {
		if got := recordLingerBelowFor(tc.pool); got != tc.below {
			t.Errorf("a pool of %d: records wait until %d share a commit, want %d", tc.pool, got, tc.below)
		}
	}
}
