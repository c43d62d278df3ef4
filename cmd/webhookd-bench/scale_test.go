package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParsePoints(t *testing.T) {
	cases := []struct {
		in      string
		want    []int
		wantErr string
	}{
		{"10000,100000,1000000", []int{10000, 100000, 1000000}, ""},
		{"10k, 100k ,1M", []int{10000, 100000, 1000000}, ""},
		{"", nil, ""},
		{" , ", nil, ""},
		{"1000,100", []int{1000, 100}, ""},
		{"0", nil, "not a count"},
		{"-5", nil, "not a count"},
		{"ten", nil, "not a count"},
		{"1G", nil, "not a count"},
		{"200M", nil, "not a count"},
		{"10k,10000", nil, "listed twice"},
	}
	for _, c := range cases {
		got, err := parsePoints("-scale-backlog", c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "-scale-backlog") {
				t.Errorf("%q: error %v, want one naming the flag and %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestScaleFlags(t *testing.T) {
	c, err := parseFlags([]string{"-scenario", "scale", "-token", "t", "-scale-backlog", "1k", "-scale-merchants", ""}, &bytes.Buffer{})
	if err != nil || !slices.Equal(c.scaleBacklog, []int{1000}) || c.scaleMerchants != nil {
		t.Fatalf("%+v, %v", c, err)
	}
	if slices.Contains(scenarios, "scale") {
		t.Error("scale is in all: it needs its own retry schedule")
	}
	_, err = parseFlags([]string{"-scenario", "scale", "-token", "t", "-scale-backlog", "", "-scale-merchants", ""}, &bytes.Buffer{})
	if err != errNoPoints {
		t.Errorf("no points: %v, want errNoPoints", err)
	}
	if _, err := parseFlags([]string{"-scenario", "single", "-token", "t", "-scale-merchants", "x"}, &bytes.Buffer{}); err == nil {
		t.Error("a bad -scale-merchants was accepted")
	}
}

func TestCheckReleaseGaps(t *testing.T) {
	s := time.Second
	cases := []struct {
		name    string
		gaps    []time.Duration
		wantErr string
	}{
		{"flat 1 s", []time.Duration{1100 * time.Millisecond, 950 * time.Millisecond, s}, ""},
		{"at the limit", []time.Duration{s, 3 * s, s}, ""},
		{"retrystorm's doubling", []time.Duration{s, 2 * s, 4 * s}, "delay 3"},
		{"the default schedule", []time.Duration{5 * s}, "saw 1 delays"},
		{"no retry at all", nil, "saw 0 delays"},
	}
	for _, c := range cases {
		err := checkReleaseGaps(c.gaps, 3, 3*s)
		if (err == nil) != (c.wantErr == "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.wantErr)
		}
	}
}

func TestWriteScalePlot(t *testing.T) {
	share := cpuShare{Engine: 0.4, Postgres: 0.3, Redis: 0.05, EngineOK: true, PostgresOK: true, RedisOK: true}
	for _, tc := range []struct {
		name   string
		points []scalePoint
		height int
	}{
		{"both curves", []scalePoint{
			{curve: "backlog", size: 10000, deliveriesPerS: 2000, cpu: share, cpuOK: true},
			{curve: "backlog", size: 100000, deliveriesPerS: 1500, cpu: share, cpuOK: true},
			{curve: "merchants", size: 100, deliveriesPerS: 1000, cpu: share, cpuOK: true},
			{curve: "merchants", size: 1000, deliveriesPerS: 900},
		}, 2},
		{"one point", []scalePoint{{curve: "merchants", size: 100, deliveriesPerS: 1000, cpu: share, cpuOK: true}}, 1},
	} {
		path := filepath.Join(t.TempDir(), "scale.png")
		if err := writeScalePlot(path, tc.points); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: not a PNG: %v", tc.name, err)
		}
		// 4 inches a row at the default 96 dpi.
		if b := img.Bounds(); b.Dy() != tc.height*4*96 || b.Dx() != 12*96 {
			t.Errorf("%s: %v, want %d row(s)", tc.name, b, tc.height)
		}
	}
	if err := writeScalePlot(filepath.Join(t.TempDir(), "x.png"), nil); err == nil {
		t.Error("no points: no error")
	}
}
