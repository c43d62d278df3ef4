package main

import "testing"

func TestPublishersDefaultPerScenario(t *testing.T) {
	for _, tc := range []struct {
		flag, scenarioDefault, want int
	}{
		{0, 0, defaultPublishers},
		{0, singlePublishers, 32},
		{4, singlePublishers, 4},
		{4, 0, 4},
	} {
		g := &loadGen{publishers: tc.flag}
		if got := g.publishersFor(tc.scenarioDefault); got != tc.want {
			t.Errorf("-publishers %d, scenario default %d: %d, want %d", tc.flag, tc.scenarioDefault, got, tc.want)
		}
	}
}
