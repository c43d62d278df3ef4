package main

import (
	"fmt"
	"io"
	"time"
)

// Defaults several scenario families share; each family's own are in its
// file. Every one can be overridden by its flag.
const (
	defaultPayload = 512
	defaultRate    = 500
)

// lab is what every scenario works with: the command line, the engine's
// APIs, the pieces that set up receivers and subscriptions (fleets),
// publish (load) and read the engine's figures (meter), and the reports of
// the scenarios already run in this invocation, which some scenarios print
// beside their own figures. Scenarios are functions of a lab, one family
// per file; a lab holds no scenario logic of its own beyond the delivery
// run most of them share (deliver.go).
type lab struct {
	cfg    config
	eng    *engine
	fleets *fleetMaker
	load   *loadGen
	meter  *meter
	// logf writes one progress line to stderr.
	logf progress
	// reports are the scenarios run so far, in order.
	reports []*report
}

// progress writes a timestamped progress line; the bench's figures go to
// stdout, its progress to stderr.
type progress func(format string, args ...any)

// progressTo returns a progress writing to w.
func progressTo(w io.Writer) progress {
	return func(format string, args ...any) {
		fmt.Fprintf(w, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
}

// earlier returns the report of a scenario run before in this invocation,
// or nil.
func (l *lab) earlier(name string) *report {
	for _, r := range l.reports {
		if r.scenario == name {
			return r
		}
	}
	return nil
}
