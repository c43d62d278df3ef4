package queue

import (
	"fmt"
	"slices"
	"testing"
)

// TestKeySlot: the slot a hash tag falls in is Redis Cluster's, from the
// cluster specification's own examples.
func TestKeySlot(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]uint16{"123456789": 0x31C3, "foo": 12182, "bar": 5061, "": 0} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestShardPrefixesSpreadOverMasters: the shards' hash tags fall in equal
// runs of slots, so that a cluster whose masters hold equal runs (what
// redis-cli --cluster create makes) gives each master as many shards.
func TestShardPrefixesSpreadOverMasters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ shards, masters int }{{12, 1}, {12, 2}, {12, 3}, {12, 4}, {12, 6}, {16, 4}, {9, 3}} {
		t.Run(fmt.Sprintf("%d shards over %d masters", tc.shards, tc.masters), func(t *testing.T) {
			prefixes := shardPrefixes(tc.shards)
			if len(prefixes) != tc.shards || len(slices.Compact(slices.Sorted(slices.Values(prefixes)))) != tc.shards {
				t.Fatalf("prefixes %v: want %d distinct", prefixes, tc.shards)
			}
			perMaster := make([]int, tc.masters)
			for _, p := range prefixes {
				slot := int(keySlot(p[1 : len(p)-1]))
				// redis-cli's split: master i holds slots from i·16384/masters.
				perMaster[slot*tc.masters/clusterSlots]++
			}
			for i, n := range perMaster {
				if n != tc.shards/tc.masters {
					t.Errorf("master %d holds %d shards (%v), want %d", i, n, perMaster, tc.shards/tc.masters)
				}
			}
		})
	}
}

// TestShardOfSpreadsMerchants: merchants spread over the shards, each
// always to the same one.
func TestShardOfSpreadsMerchants(t *testing.T) {
	t.Parallel()
	const merchants, shards = 12_000, 12
	count := make([]int, shards)
	for i := range merchants {
		m := fmt.Sprintf("merchant_%05d", i)
		k := shardOf(m, shards)
		if shardOf(m, shards) != k {
			t.Fatalf("merchant %s moved", m)
		}
		count[k]++
	}
	for k, n := range count {
		if n < merchants/shards*9/10 || n > merchants/shards*11/10 {
			t.Errorf("shard %d holds %d merchants of %d (%v): not within 10%% of even", k, n, merchants, count)
		}
	}
}
