package main

import "testing"

// TestJudgeLatency: latency's p99 is judged against the target of the
// rate it ran at, never the loaded target at a light rate, and below
// loadedRate the whole cost per delivery is judged too.
func TestJudgeLatency(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rate, p99 float64
		complete  bool
		cpuTotal  float64 // 0: the meter measured none
		wantP99   string
		p99Met    bool
		wantCPU   string // "": not judged
		cpuMet    bool
	}{
		{name: "loaded, met", rate: 500, p99: 40, complete: true, cpuTotal: 1.5, wantP99: "<= 100", p99Met: true},
		{name: "loaded, over", rate: 800, p99: 140, complete: true, wantP99: "<= 100"},
		{name: "loaded, incomplete", rate: 500, p99: 40, wantP99: "<= 100"},
		{name: "light, both met", rate: 300, p99: 6, complete: true, cpuTotal: 0.9,
			wantP99: "<= 10 (light load)", p99Met: true, wantCPU: "<= 1.0 (light load)", cpuMet: true},
		{name: "light, the cost over", rate: 300, p99: 6, complete: true, cpuTotal: 1.7,
			wantP99: "<= 10 (light load)", p99Met: true, wantCPU: "<= 1.0 (light load)"},
		{name: "light, the p99 over a quiet engine's", rate: 300, p99: 40, complete: true,
			wantP99: "<= 10 (light load)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &report{scenario: "latency"}
			if tc.cpuTotal > 0 {
				r.add("cpu_total_ms_per_delivery", tc.cpuTotal, "CPU ms")
			}
			judgeLatency(r, tc.rate, tc.p99, tc.complete)
			got := map[string]figure{}
			for _, f := range r.figures {
				got[f.key] = f
			}
			p99 := got["p99_ms"]
			if p99.target != tc.wantP99 || p99.met == nil || *p99.met != tc.p99Met {
				t.Errorf("p99_ms judged %q met=%v, want %q met=%v", p99.target, p99.met != nil && *p99.met, tc.wantP99, tc.p99Met)
			}
			cpu := got["cpu_total_ms_per_delivery"]
			if cpu.target != tc.wantCPU || (tc.wantCPU != "" && (cpu.met == nil || *cpu.met != tc.cpuMet)) {
				t.Errorf("cpu_total_ms_per_delivery judged %q met=%v, want %q met=%v", cpu.target, cpu.met != nil && *cpu.met, tc.wantCPU, tc.cpuMet)
			}
		})
	}
}
