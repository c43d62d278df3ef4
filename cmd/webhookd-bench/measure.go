package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/procs"
)

// latencySummary is the distribution of publish-to-arrival times.
type latencySummary struct {
	N                  int
	P50, P95, P99, Max time.Duration
}

// summarize sorts d in place and takes nearest-rank percentiles.
func summarize(d []time.Duration) latencySummary {
	if len(d) == 0 {
		return latencySummary{}
	}
	slices.Sort(d)
	return latencySummary{
		N:   len(d),
		P50: percentile(d, 0.50),
		P95: percentile(d, 0.95),
		P99: percentile(d, 0.99),
		Max: d[len(d)-1],
	}
}

// percentile is the nearest-rank percentile of sorted: the smallest value
// with at least q of the samples at or below it.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// cpuSample is the CPU seconds consumed so far by each party of a run.
type cpuSample struct {
	// Engine from its process_cpu_seconds_total metric, or /proc/<pid> with
	// -pid; summed over its processes.
	Engine float64
	// Bench is this process (publishers and receivers), from getrusage.
	Bench float64
	// Postgres sums the server processes of the engine's database and the
	// cluster's background workers.
	Postgres float64
	// Redis is the server's own used_cpu_user + used_cpu_sys.
	Redis float64
	// Machine is the busy time of all CPUs (/proc/stat), so that work by
	// anything else on the machine during a run shows up in the report.
	Machine float64
	// WAL is the Postgres cluster's write-ahead log position in bytes:
	// what the run wrote to it, the figure replication and backups carry.
	WAL float64
	// RedisCommands is how many commands Redis has run (redisCommands).
	RedisCommands float64
	// OK flags which figures could be read.
	EngineOK, PostgresOK, RedisOK, WALOK, RedisCommandsOK bool
}

// sub returns c - before, field by field.
func (c cpuSample) sub(before cpuSample) cpuSample {
	return cpuSample{
		Engine: c.Engine - before.Engine, Bench: c.Bench - before.Bench,
		Postgres: c.Postgres - before.Postgres, Redis: c.Redis - before.Redis,
		Machine: c.Machine - before.Machine, WAL: c.WAL - before.WAL,
		RedisCommands: c.RedisCommands - before.RedisCommands,

		EngineOK: c.EngineOK && before.EngineOK, PostgresOK: c.PostgresOK && before.PostgresOK,
		RedisOK: c.RedisOK && before.RedisOK, WALOK: c.WALOK && before.WALOK,
		RedisCommandsOK: c.RedisCommandsOK && before.RedisCommandsOK,
	}
}

// cpuShare is a run's CPU milliseconds per delivery, by party. Total is
// the system's: engine, Postgres and Redis, the bench (load generator and
// receivers) left out; it is known only when all three are.
type cpuShare struct {
	Engine, Postgres, Redis, Total, Bench float64
	EngineOK, PostgresOK, RedisOK         bool
}

// perDelivery divides the CPU of a run (a delta from sub) among its
// deliveries. CPU seconds per 1,000 deliveries are milliseconds per delivery.
func (c cpuSample) perDelivery(deliveries int64) cpuShare {
	if deliveries <= 0 {
		return cpuShare{}
	}
	msPer := 1000 / float64(deliveries)
	s := cpuShare{
		Engine: c.Engine * msPer, Postgres: c.Postgres * msPer, Redis: c.Redis * msPer, Bench: c.Bench * msPer,
		EngineOK: c.EngineOK, PostgresOK: c.PostgresOK, RedisOK: c.RedisOK,
	}
	if s.EngineOK && s.PostgresOK && s.RedisOK {
		s.Total = s.Engine + s.Postgres + s.Redis
	}
	return s
}

// selfCPU is this process's user+system CPU seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// sumPIDs adds read(pid) over the engine's processes. One that cannot be
// read (it exited) fails the whole figure: a partial sum would pass for the
// engine's.
func sumPIDs[T int64 | float64](pids []int, read func(int) (T, error)) (T, error) {
	var total T
	for _, pid := range pids {
		v, err := read(pid)
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

// pidsCPU sums the CPU seconds of the engine's processes.
func pidsCPU(pids []int) (float64, error) {
	return sumPIDs(pids, func(pid int) (float64, error) {
		st, err := procs.ReadStat(pid)
		return st.CPU, err
	})
}

// pidsRSS sums the resident memory of the engine's processes, in bytes.
func pidsRSS(pids []int) (int64, error) {
	return sumPIDs(pids, pidRSS)
}

// pidRSS reads VmRSS of a process, in bytes.
func pidRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("rss of pid %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("rss of pid %d: %w", pid, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("rss of pid %d: no VmRSS line", pid)
}

// postmasterOf returns the postmaster of a backend process: its parent,
// when that is a postgres process on this machine. It fails when the
// server runs elsewhere or in another pid namespace (a container).
func postmasterOf(backend int) (int, error) {
	st, err := procs.ReadStat(backend)
	if err != nil {
		return 0, fmt.Errorf("postmaster: %w", err)
	}
	if st.Comm != "postgres" {
		return 0, fmt.Errorf("postmaster: pid %d is %q, not a postgres backend on this machine", backend, st.Comm)
	}
	parent, err := procs.ReadStat(st.PPID)
	if err != nil || parent.Comm != "postgres" {
		return 0, fmt.Errorf("postmaster: the parent %d of backend %d is not postgres", st.PPID, backend)
	}
	return st.PPID, nil
}

// postgresCPU sums the CPU of the postgres processes that serve database
// (their command line names it) plus the cluster-wide background processes
// (WAL writer, checkpointer, ...), whose work the engine's writes cause.
// Backends of other databases on the same cluster (test runs) are left out.
// With postmaster known, only that server's processes (itself and its
// children) count, so that another cluster on the machine does not.
func postgresCPU(database string, postmaster int) (float64, bool) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, false
	}
	var total float64
	found := false
	for _, dir := range dirs {
		stat, err := os.ReadFile(dir + "/stat")
		if err != nil {
			continue // the process ended meanwhile
		}
		st, err := procs.ParseStat(string(stat))
		if err != nil || st.Comm != "postgres" {
			continue
		}
		if postmaster > 0 && !isOwnPostgres(dir, st.PPID, postmaster) {
			continue
		}
		cmd, err := os.ReadFile(dir + "/cmdline")
		if err != nil {
			continue
		}
		if isPostgresOf(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})), database) {
			total += st.CPU
			found = true
		}
	}
	return total, found
}

// isOwnPostgres tells whether the process at dir (/proc/<pid>), whose
// parent is ppid, is the postmaster or one of its children.
func isOwnPostgres(dir string, ppid, postmaster int) bool {
	return ppid == postmaster || filepath.Base(dir) == strconv.Itoa(postmaster)
}

// isPostgresOf tells whether a postgres process command line belongs to the
// engine's work: a backend "postgres: user database host(port) state", or a
// background process, which names no client host.
func isPostgresOf(cmdline, database string) bool {
	rest, ok := strings.CutPrefix(strings.TrimSpace(cmdline), "postgres: ")
	if !ok {
		return true // the postmaster itself: reaped backends count here
	}
	fields := strings.Fields(rest)
	if len(fields) > 0 && strings.HasSuffix(fields[0], ":") {
		fields = fields[1:] // cluster_name prefix, as Debian sets it: "15/main:"
	}
	isBackend := len(fields) >= 3 && (strings.Contains(fields[2], "(") || fields[2] == "[local]")
	if !isBackend {
		return true
	}
	return fields[1] == database
}

// redisInfo reads integer or float fields of INFO section.
func redisInfo(ctx context.Context, rdb redis.UniversalClient, section string, keys ...string) (map[string]float64, error) {
	text, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("redis INFO %s: %w", section, err)
	}
	out := make(map[string]float64, len(keys))
	for line := range strings.SplitSeq(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !slices.Contains(keys, k) {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("redis INFO %s: %s: %w", section, k, err)
		}
		out[k] = f
	}
	for _, k := range keys {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("redis INFO %s: no %s", section, k)
		}
	}
	return out, nil
}

// redisCPU is the Redis server's own CPU seconds; on a Cluster, every
// node's, masters and replicas (a replica applying the masters' writes
// is part of what the schedule costs).
func redisCPU(ctx context.Context, rdb redis.UniversalClient) (float64, bool) {
	return sumOverNodes(ctx, rdb, func(ctx context.Context, node redis.UniversalClient) (float64, error) {
		m, err := redisInfo(ctx, node, "cpu", "used_cpu_user", "used_cpu_sys")
		if err != nil {
			return 0, err
		}
		return m["used_cpu_user"] + m["used_cpu_sys"], nil
	})
}

// redisCommands is how many commands the Redis server has run, scripts'
// and functions' own commands included (INFO commandstats); on a
// Cluster, every node's, as redisCPU counts them. A count that needs no
// clock: what a change to the schedule's functions does shows in it when
// the machine's spread hides it in the CPU.
func redisCommands(ctx context.Context, rdb redis.UniversalClient) (float64, bool) {
	return sumOverNodes(ctx, rdb, func(ctx context.Context, node redis.UniversalClient) (float64, error) {
		text, err := node.Info(ctx, "commandstats").Result()
		if err != nil {
			return 0, fmt.Errorf("redis INFO commandstats: %w", err)
		}
		var n int64
		for _, calls := range commandCallCounts(text) {
			n += calls
		}
		return float64(n), nil
	})
}

// sumOverNodes is read of rdb's server, or summed over every node of a
// Cluster, masters and replicas; false when a node could not be read.
func sumOverNodes(ctx context.Context, rdb redis.UniversalClient, read func(context.Context, redis.UniversalClient) (float64, error)) (float64, bool) {
	cluster, ok := rdb.(*redis.ClusterClient)
	if !ok {
		v, err := read(ctx, rdb)
		return v, err == nil
	}
	var mu sync.Mutex
	total := 0.0
	err := cluster.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
		v, err := read(ctx, node)
		if err != nil {
			return err
		}
		mu.Lock()
		total += v
		mu.Unlock()
		return nil
	})
	return total, err == nil
}

// commandCalls is the calls= count of command (cmdstat_NAME) in the text
// of INFO commandstats; 0 when it was never called.
func commandCalls(text, command string) int64 {
	return commandCallCounts(text)[command]
}

// commandCallCounts is the calls= count of every command (cmdstat_NAME)
// in the text of INFO commandstats: the commands a script or function
// runs count under their own names, beside its EVALSHA or FCALL.
func commandCallCounts(text string) map[string]int64 {
	out := map[string]int64{}
	for line := range strings.SplitSeq(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(k, "cmdstat_") {
			continue
		}
		for field := range strings.SplitSeq(v, ",") {
			if n, ok := strings.CutPrefix(field, "calls="); ok {
				calls, _ := strconv.ParseInt(n, 10, 64)
				out[k] = calls
			}
		}
	}
	return out
}

// redisUsedMemory is INFO memory used_memory, in bytes.
func redisUsedMemory(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	m, err := redisInfo(ctx, rdb, "memory", "used_memory")
	if err != nil {
		return 0, err
	}
	return int64(m["used_memory"]), nil
}

// machineBusy is the busy CPU seconds of all CPUs since boot: the first
// line of /proc/stat minus idle and iowait (guest time is already in user).
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	v, err := parseMachineBusy(string(b))
	if err != nil {
		return 0
	}
	return v
}

// parseMachineBusy reads the busy CPU seconds from /proc/stat's text.
func parseMachineBusy(stat string) (float64, error) {
	line, _, _ := strings.Cut(stat, "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, fmt.Errorf("proc stat: unexpected first line %q", line)
	}
	var busy uint64
	// user nice system idle iowait irq softirq steal: all but idle and iowait.
	for i, f := range fields[1:9] {
		if i == 3 || i == 4 {
			continue
		}
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: %w", err)
		}
		busy += v
	}
	return float64(busy) / procs.ClockTicks, nil
}
