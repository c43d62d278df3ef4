package main

import (
	"encoding/json"
	"io"
	"slices"
	"testing"
)

// TestNoisyLayouts checks the merchants, subscriptions and receivers of
// noisy and noisy5: the hostile merchants get the same share of events in
// both, noisy5 fans each of their events out to 5 hanging receivers, and
// only the healthy merchants' deliveries are waited for and measured.
func TestNoisyLayouts(t *testing.T) {
	const events = 1000
	for _, tc := range []struct {
		name                   string
		merchants, hangingPer  int
		hostile, hanging, subs int
	}{
		{"noisy", noisySubs, 1, 1, 1, 10},
		{"noisy5", noisySubs, noisy5Hanging, 1, 5, 14},
		{"noisy5 -subscriptions 20", 20, noisy5Hanging, 2, 10, 28},
		{"noisy5 -subscriptions 1", 1, noisy5Hanging, 1, 5, 5},
	} {
		l := newNoisyLayout("m", tc.merchants, tc.hangingPer)
		if len(l.merchants) != tc.merchants || l.hostile != tc.hostile || l.hanging != tc.hanging || len(l.owners) != tc.subs {
			t.Errorf("%s: %d merchants, %d hostile, %d hanging of %d subscriptions; want %d, %d, %d of %d", tc.name,
				len(l.merchants), l.hostile, l.hanging, len(l.owners), tc.merchants, tc.hostile, tc.hanging, tc.subs)
			continue
		}
		if tc.hangingPer == 1 && !slices.Equal(l.owners, l.merchants) {
			t.Errorf("%s: owners %v, want one subscription per merchant %v", tc.name, l.owners, l.merchants)
		}
		for i, m := range l.owners {
			if hostile := slices.Contains(l.merchants[:l.hostile], m); hostile != (i < l.hanging) {
				t.Errorf("%s: subscription %d of %s: hostile %v, hanging %v", tc.name, i, m, hostile, i < l.hanging)
			}
		}

		rcv, err := startReceivers(len(l.owners), l.hanging, 4, newPublishLog(1))
		if err != nil {
			t.Fatal(err)
		}
		f := &fleet{rcv: rcv, merchants: l.owners}
		if got := f.healthyMerchants(); !slices.Equal(got, l.merchants[l.hostile:]) {
			t.Errorf("%s: healthy merchants %v, want %v", tc.name, got, l.merchants[l.hostile:])
		}
		// Events go to the merchants round-robin, as deliver publishes them.
		perEvent := f.healthyPerMerchant()
		var hostileEvents, expected, hangingDeliveries int
		for i := range events {
			m := l.merchants[i%len(l.merchants)]
			expected += int(perEvent[m])
			if slices.Contains(l.merchants[:l.hostile], m) {
				hostileEvents++
				for j, owner := range f.merchants {
					if owner == m && rcv.endpoints[j].hang {
						hangingDeliveries++
					}
				}
			}
		}
		if want := events * tc.hostile / tc.merchants; hostileEvents != want {
			t.Errorf("%s: %d of %d events to hostile merchants, want %d", tc.name, hostileEvents, events, want)
		}
		if want := events - hostileEvents; expected != want {
			t.Errorf("%s: %d healthy deliveries expected, want one per healthy event, %d", tc.name, expected, want)
		}
		if want := hostileEvents * tc.hangingPer; hangingDeliveries != want {
			t.Errorf("%s: %d hanging deliveries, want %d", tc.name, hangingDeliveries, want)
		}
		rcv.close()
	}
}

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

func TestPublishersDefaultPerScenario(t *testing.T) {
	for _, tc := range []struct {
		flag, scenarioDefault, want int
	}{
		{0, 0, defaultPublishers},
		{0, singlePublishers, 32},
		{4, singlePublishers, 4},
		{4, 0, 4},
	} {
		b := &bench{cfg: config{publishers: tc.flag}}
		if got := b.publishers(tc.scenarioDefault); got != tc.want {
			t.Errorf("-publishers %d, scenario default %d: %d, want %d", tc.flag, tc.scenarioDefault, got, tc.want)
		}
	}
}

// TestPayoutPayload checks single's payload: the catalogue's payout.paid
// example, unique per event, filled to the size asked for with varied
// metadata.
func TestPayoutPayload(t *testing.T) {
	if a, b := payoutPayload("run", 7, 1024), payoutPayload("run", 8, 1024); string(a[len(a)-300:]) == string(b[len(b)-300:]) {
		t.Error("two events' metadata are the same")
	}
	for _, size := range []int{1024, 2000, 1500, 10} {
		p := payoutPayload("run", 7, size)
		var v struct {
			Type, Status, Reference string
			Metadata                map[string]string
		}
		if err := json.Unmarshal(p, &v); err != nil {
			t.Fatalf("size %d: %s: %v", size, p, err)
		}
		if v.Type != "payout" || v.Status != "paid" || v.Reference != "Invoice run-7" || v.Metadata["order_id"] != "A-7" {
			t.Errorf("size %d: %+v", size, v)
		}
		if size >= 1024 && len(p) != size {
			t.Errorf("size %d: %d bytes", size, len(p))
		}
		if size < 1024 && len(v.Metadata) != 2 {
			t.Errorf("size %d: filled below the example's own size: %d bytes", size, len(p))
		}
		if size >= 1024 && (v.Metadata["invoice_0"] == "" || v.Metadata["customer_1"] == "") {
			t.Errorf("size %d: metadata %v, want invoices and customers", size, v.Metadata)
		}
	}
}

func TestKeyedPayload(t *testing.T) {
	p := keyedPayloadFor("run", 7, 100, 42)
	var v struct {
		Seq int    `json:"seq"`
		Key string `json:"key"`
	}
	if err := json.Unmarshal(p, &v); err != nil || v.Seq != 7 || v.Key != "k-42" || len(p) != 100 {
		t.Fatalf("payload %s (%d bytes): %+v, %v", p, len(p), v, err)
	}
}
