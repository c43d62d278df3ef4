package procs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ClockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat and
// /proc/stat. It is 100 on every Linux architecture Go supports, and
// reading it via sysconf would need cgo.
const ClockTicks = 100

// Stat is what the bench and the store's benchmarks read of another
// process's /proc/<pid>/stat (a Postgres backend, the engine).
type Stat struct {
	Comm string
	PPID int
	// CPU is utime+stime+cutime+cstime in seconds: children that exited and
	// were reaped (postgres backends) stay counted in their parent.
	CPU float64
}

// ParseStat parses one /proc/<pid>/stat line. comm is in parentheses and
// may itself hold spaces and parentheses, so fields are counted from the
// last ')'.
func ParseStat(line string) (Stat, error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("proc stat: malformed %q", line)
	}
	fields := strings.Fields(line[end+1:])
	// fields[0] is state (field 3), fields[1] ppid; utime..cstime are fields 14..17.
	if len(fields) < 15 {
		return Stat{}, fmt.Errorf("proc stat: only %d fields", len(fields))
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return Stat{}, fmt.Errorf("proc stat: ppid: %w", err)
	}
	var ticks uint64
	for _, f := range fields[11:15] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("proc stat: %w", err)
		}
		ticks += v
	}
	return Stat{Comm: line[open+1 : end], PPID: ppid, CPU: float64(ticks) / ClockTicks}, nil
}

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, fmt.Errorf("stat of pid %d: %w", pid, err)
	}
	return ParseStat(string(b))
}
