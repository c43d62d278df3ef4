package queue

import (
	"fmt"
	"hash/fnv"
)

// DefaultScheduleShards is how many shards the schedule is spread over
// unless configured: 12 divides evenly over Redis Clusters of 1, 2, 3, 4
// and 6 masters (each master then serves as many shards as the next), and
// costs a single Redis server nothing that matters (a worker only looks in
// a shard it was told has work, or once per idle check).
const DefaultScheduleShards = 12

// MaxScheduleShards bounds the configured shard count: an idle check reads
// every shard once.
const MaxScheduleShards = 256

// clusterSlots is how many hash slots a Redis Cluster spreads its keys
// over.
const clusterSlots = 16384

// legacyPrefix is the one hash tag every key of the schedule lived under
// before it was sharded; Migrate moves what is left there.
const legacyPrefix = "{webhookd:lanes}"

// shardPrefixes names the n shards' keys. Each is a Cluster hash tag whose
// slot lies in the k-th n-th of the slot space: `redis-cli --cluster
// create` gives each master one contiguous, equal run of slots, so with n
// a multiple of the masters each master holds as many shards as every
// other (a hash of "shard k" alone would leave that to chance: 12 tags
// over 3 masters are often split 3/4/5).
func shardPrefixes(n int) []string {
	out := make([]string, n)
	for k := range n {
		lo, hi := k*clusterSlots/n, (k+1)*clusterSlots/n
		for j := 0; ; j++ {
			tag := fmt.Sprintf("webhookd:lanes:%d.%d", k, j)
			if s := int(keySlot(tag)); s >= lo && s < hi {
				out[k] = "{" + tag + "}"
				break
			}
		}
	}
	return out
}

// shardOf is the shard merchant lane m's attempts are parked in, of n: a
// merchant lives in one shard, so its round-robin over its subscriptions,
// their rate limits and their order stay one function call's work.
func shardOf(m string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(m))
	return int(h.Sum32() % uint32(n))
}

// keySlot is the Redis Cluster hash slot of a key that is its own hash tag:
// CRC16 (XMODEM) modulo 16384, as Redis computes it.
func keySlot(key string) uint16 {
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % clusterSlots
}
