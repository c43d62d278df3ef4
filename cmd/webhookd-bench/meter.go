package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// sweeperRequeuedMetric counts the deliveries the engine's sweeper found
// overdue without a task and enqueued again.
const sweeperRequeuedMetric = "webhookd_sweeper_requeued_total"

// meter reads the engine's side of a run: the CPU of every party (engine,
// Postgres, Redis, the bench, the machine), the engine's /metrics and
// resident memory, and the engine's Postgres and Redis for what the
// scenarios check there (recorded attempts, sizes, memory). The pure
// parsing and arithmetic are in measure.go and the queries in pg.go.
type meter struct {
	eng *engine
	// pids are -pid: the engine's processes, whose CPU and RSS are read
	// from /proc; without them, from the process_* metrics.
	pids []int
	// metricsURLs are -metrics: every engine process's internal base URL.
	metricsURLs []string
	// db and rdb are the engine's Postgres and Redis; nil for raw, which
	// needs no engine.
	db  *pgxpool.Pool
	rdb redis.UniversalClient
	// postmaster is the pid of the Postgres server the engine uses, when it
	// runs on this machine; 0: every postgres process counts.
	postmaster int
}

// sampleCPU reads every party's CPU counter once.
func (m *meter) sampleCPU(ctx context.Context) (cpuSample, error) {
	s := cpuSample{Bench: selfCPU(), Machine: machineBusy()}
	if len(m.pids) > 0 {
		if v, err := pidsCPU(m.pids); err == nil {
			s.Engine, s.EngineOK = v, true
		}
	}
	if !s.EngineOK {
		figures, err := m.engineMetrics(ctx)
		if err == nil {
			s.Engine, s.EngineOK = figures["process_cpu_seconds_total"]
		}
	}
	if m.db != nil {
		s.Postgres, s.PostgresOK = postgresCPU(m.db.Config().ConnConfig.Database, m.postmaster)
		s.WAL, s.WALOK = walPosition(ctx, m.db)
	}
	if m.rdb != nil {
		s.Redis, s.RedisOK = redisCPU(ctx, m.rdb)
		s.RedisCommands, s.RedisCommandsOK = redisCommands(ctx, m.rdb)
	}
	return s, nil
}

// sweeperRequeued reads webhookd_sweeper_requeued_total, summed over the
// engine's processes (-metrics).
func (m *meter) sweeperRequeued(ctx context.Context) (float64, error) {
	figures, err := m.engineMetrics(ctx)
	if err != nil {
		return 0, err
	}
	v, ok := figures[sweeperRequeuedMetric]
	if !ok {
		return 0, fmt.Errorf("no %s in /metrics", sweeperRequeuedMetric)
	}
	return v, nil
}

// engineProcesses says how many engine processes the engine figures sum,
// and where they come from.
func (m *meter) engineProcesses() (int, string) {
	if len(m.pids) > 0 {
		return len(m.pids), "/proc of -pid"
	}
	return len(m.metricsURLs), "process_cpu_seconds_total of -metrics"
}

// reportCPU adds the CPU milliseconds per delivery of each party over a
// run's measured window (cpu, a delta) and in total.
func (m *meter) reportCPU(r *report, cpu cpuSample, deliveries int64) {
	n, source := m.engineProcesses()
	r.add("engine_processes", n, "processes")
	if deliveries > 0 {
		s := cpu.perDelivery(deliveries)
		if s.EngineOK {
			r.add("cpu_engine_ms_per_delivery", s.Engine, "CPU ms")
		} else {
			r.note("engine CPU unknown: no -pid and no process_cpu_seconds_total in /metrics")
		}
		if s.PostgresOK {
			r.add("cpu_postgres_ms_per_delivery", s.Postgres, "CPU ms")
		}
		if s.RedisOK {
			r.add("cpu_redis_ms_per_delivery", s.Redis, "CPU ms")
		}
		if s.EngineOK && s.PostgresOK && s.RedisOK {
			r.add("cpu_total_ms_per_delivery", s.Total, "CPU ms")
		}
		r.add("cpu_bench_ms_per_delivery", s.Bench, "CPU ms")
		if cpu.WALOK {
			r.add("pg_wal_bytes_per_delivery", cpu.WAL/float64(deliveries), "B")
		}
		if cpu.RedisCommandsOK {
			r.add("redis_commands_per_delivery", cpu.RedisCommands/float64(deliveries), "commands")
		}
		r.note("engine CPU from %s (%d process(es)); total is engine + Postgres + Redis, the bench left out", source, n)
	}
	r.add("cpu_machine_busy_s", cpu.Machine, "CPU s")
	r.add("cpu_unattributed_s", cpu.Machine-cpu.Engine-cpu.Bench-cpu.Postgres-cpu.Redis, "CPU s")
}

// engineRSS reads the engine's resident memory, summed over its processes:
// from /proc with -pid, else from their process_resident_memory_bytes.
func (m *meter) engineRSS(ctx context.Context) (int64, bool) {
	if len(m.pids) > 0 {
		if v, err := pidsRSS(m.pids); err == nil {
			return v, true
		}
	}
	figures, err := m.engineMetrics(ctx)
	if err != nil {
		return 0, false
	}
	v, ok := figures["process_resident_memory_bytes"]
	return int64(v), ok
}

// metricTotal reads one metric summed over its series and over -metrics;
// a labelled counter none of whose series exists yet is 0.
func (m *meter) metricTotal(ctx context.Context, name string) (float64, bool) {
	figures, err := m.engineMetrics(ctx)
	if err != nil {
		return 0, false
	}
	return figures[name], true
}

// engineMetrics is every metric of the engine's processes (-metrics),
// summed per name.
func (m *meter) engineMetrics(ctx context.Context) (map[string]float64, error) {
	return m.eng.metrics(ctx, m.metricsURLs)
}
