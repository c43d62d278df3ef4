package main

import (
	"io"
	"slices"
	"testing"
)

func TestParseFlagsScenarios(t *testing.T) {
	if i, j := slices.Index(scenarios, "noisy"), slices.Index(scenarios, "noisy5"); i < 0 || j < i {
		t.Errorf("scenarios %v: want noisy5 in all, after noisy (it reads noisy's figures)", scenarios)
	}
	for _, name := range append(slices.Clone(scenarios), "all") {
		if c, err := parseFlags([]string{"-scenario", name, "-token", "t"}, io.Discard); err != nil || c.scenario != name {
			t.Errorf("-scenario %s: %+v, %v", name, c, err)
		}
	}
	if _, err := parseFlags([]string{"-scenario", "noisy6", "-token", "t"}, io.Discard); err == nil {
		t.Error("-scenario noisy6 accepted")
	}
	// retrystorm needs the engine started for it: it runs only when named.
	if c, err := parseFlags([]string{"-scenario", "retrystorm", "-token", "t"}, io.Discard); err != nil || c.scenario != "retrystorm" {
		t.Errorf("-scenario retrystorm: %+v, %v", c, err)
	}
	if slices.Contains(scenarios, "retrystorm") || !slices.Contains(scenarios, "single") {
		t.Errorf("scenarios %v: want single in all and retrystorm not", scenarios)
	}
}

func TestParseFlagsEngineProcesses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		pids    []int
		metrics []string
		wantErr bool
	}{
		{"none: /metrics of -internal", nil, nil, []string{"http://127.0.0.1:8081"}, false},
		{"one serve process", []string{"-pid", "4242"}, []int{4242}, []string{"http://127.0.0.1:8081"}, false},
		{"an api and three workers", []string{"-pid", "10, 11,12,13", "-internal", "http://h:1",
			"-metrics", "http://h:1,http://h:2, http://h:3,http://h:4"},
			[]int{10, 11, 12, 13}, []string{"http://h:1", "http://h:2", "http://h:3", "http://h:4"}, false},
		{"empty items dropped", []string{"-pid", "10,,11,"}, []int{10, 11}, []string{"http://127.0.0.1:8081"}, false},
		{"a pid twice would count twice", []string{"-pid", "10,10"}, nil, nil, true},
		{"not a number", []string{"-pid", "api"}, nil, nil, true},
		{"not a process id", []string{"-pid", "0"}, nil, nil, true},
		{"negative", []string{"-pid", "-3"}, nil, nil, true},
	} {
		c, err := parseFlags(append([]string{"-token", "t"}, tc.args...), io.Discard)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s: accepted, pids %v", tc.name, c.pids)
			}
			continue
		}
		if err != nil || !slices.Equal(c.pids, tc.pids) || !slices.Equal(c.metricsURLs, tc.metrics) {
			t.Errorf("%s: pids %v, metrics %v, %v; want %v, %v", tc.name, c.pids, c.metricsURLs, err, tc.pids, tc.metrics)
		}
	}
}

// TestParseFlagsScenarioLists: -scenario takes a list, run in its order,
// so that a variant of single is read beside single's figures; the
// variants of issues 26 and 27 run only when named.
func TestParseFlagsScenarioLists(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		todo    []string
		wantErr bool
	}{
		{[]string{"-scenario", "single,mtls, jwe,broker"}, []string{"single", "mtls", "jwe", "broker"}, false},
		{[]string{"-scenario", "batched"}, []string{"batched"}, false},
		{[]string{"-scenario", "single,nope"}, nil, true},
		{[]string{"-scenario", ","}, nil, true},
		{[]string{"-scenario", "jwe", "-jwe-key", "rsa"}, []string{"jwe"}, false},
		{[]string{"-scenario", "jwe", "-jwe-key", "ed25519"}, nil, true},
	} {
		c, err := parseFlags(append([]string{"-token", "t"}, tc.args...), io.Discard)
		if tc.wantErr != (err != nil) || (!tc.wantErr && !slices.Equal(c.todo, tc.todo)) {
			t.Errorf("%v: %v, %v", tc.args, c.todo, err)
		}
	}
	for _, name := range []string{"mtls", "jwe", "broker", "batched"} {
		if slices.Contains(scenarios, name) {
			t.Errorf("%s in all", name)
		}
	}
	if c, err := parseFlags([]string{"-scenario", "raw"}, io.Discard); err != nil || c.needsEngine() {
		t.Errorf("raw alone needs no token nor engine: %v", err)
	}
	if _, err := parseFlags([]string{"-scenario", "raw,broker"}, io.Discard); err == nil {
		t.Error("raw,broker without a token accepted")
	}
}

// TestParseFlagsBrokerKinds: -broker-kind is one of the kinds the broker
// scenario knows, rabbitmq by default; -nats and -mqtt are what the
// engine's destinations take.
func TestParseFlagsBrokerKinds(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		kind    string
		wantErr bool
	}{
		{nil, "rabbitmq", false},
		{[]string{"-broker-kind", "nats"}, "nats", false},
		{[]string{"-broker-kind", "mqtt", "-mqtt", "mosquitto.internal:1883"}, "mqtt", false},
		{[]string{"-broker-kind", "kafka"}, "", true},
		{[]string{"-broker-kind", "NATS"}, "", true},
		{[]string{"-broker-kind", ""}, "", true},
		{[]string{"-nats", "tls://user:pw@nats.internal:4222"}, "rabbitmq", false},
		{[]string{"-nats", "nats://127.0.0.1"}, "", true},
		{[]string{"-nats", "http://127.0.0.1:4222"}, "", true},
		{[]string{"-nats", "nats://127.0.0.1:4222/subject"}, "", true},
		{[]string{"-mqtt", "mqtt://127.0.0.1:1883"}, "", true},
		{[]string{"-mqtt", "127.0.0.1"}, "", true},
		// A scenario named without -scenario would otherwise be ignored,
		// with every flag after it.
		{[]string{"broker", "-broker-kind", "nats"}, "", true},
	} {
		c, err := parseFlags(append([]string{"-token", "t", "-scenario", "broker"}, tc.args...), io.Discard)
		if tc.wantErr != (err != nil) || (!tc.wantErr && c.brokerKind != tc.kind) {
			t.Errorf("%v: kind %q, %v", tc.args, c.brokerKind, err)
		}
	}
}
