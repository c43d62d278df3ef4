package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// figure is one measured value of a scenario, with the target it is held
// against, if any.
type figure struct {
	key    string
	value  any
	unit   string
	target string
	met    *bool
}

// report is the outcome of one scenario: ordered figures and free notes
// (what limited the run, what could not be measured).
type report struct {
	scenario string
	params   string
	figures  []figure
	notes    []string
}

// add appends a figure with no target.
func (r *report) add(key string, value any, unit string) {
	r.figures = append(r.figures, figure{key: key, value: value, unit: unit})
}

// addTarget adds a figure judged against a target; met says whether it holds.
func (r *report) addTarget(key string, value any, unit, target string, met bool) {
	r.figures = append(r.figures, figure{key: key, value: value, unit: unit, target: target, met: &met})
}

// target holds the figure already added under key against a target; met
// says whether it holds. It reports whether the figure was there.
func (r *report) target(key, target string, met bool) bool {
	for i := range r.figures {
		if r.figures[i].key == key {
			r.figures[i].target, r.figures[i].met = target, &met
			return true
		}
	}
	return false
}

// note appends a free note: what limited the run or could not be measured.
func (r *report) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// get returns the value of key, if the report has it.
func (r *report) get(key string) (any, bool) {
	for _, f := range r.figures {
		if f.key == key {
			return f.value, true
		}
	}
	return nil, false
}

// ms turns a duration into float milliseconds with microsecond precision,
// the unit every latency figure is reported in.
func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// round keeps three significant decimals, enough for every figure here.
func round(v float64) float64 {
	return float64(int64(v*1000+0.5*sign(v))) / 1000
}

// sign is -1 for a negative v, else 1.
func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}

// MarshalJSON writes one flat object: scenario, params, each figure by key
// in the order added, then targets and notes.
func (r *report) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"scenario":`)
	writeJSONValue(&b, r.scenario)
	b.WriteString(`,"params":`)
	writeJSONValue(&b, r.params)
	targets := map[string]any{}
	for _, f := range r.figures {
		b.WriteByte(',')
		writeJSONValue(&b, f.key)
		b.WriteByte(':')
		writeJSONValue(&b, f.value)
		if f.met != nil {
			targets[f.key] = map[string]any{"target": f.target, "unit": f.unit, "met": *f.met}
		}
	}
	if len(targets) > 0 {
		b.WriteString(`,"targets":`)
		writeJSONValue(&b, targets)
	}
	if len(r.notes) > 0 {
		b.WriteString(`,"notes":`)
		writeJSONValue(&b, r.notes)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeJSONValue writes v as JSON, floats rounded as round does.
func writeJSONValue(b *bytes.Buffer, v any) {
	if f, ok := v.(float64); ok {
		v = round(f)
	}
	// No HTML escaping: targets read "<= 100", not "\u003c= 100".
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		out.Reset()
		_ = enc.Encode(fmt.Sprint(v)) // a string always encodes
	}
	b.Write(bytes.TrimRight(out.Bytes(), "\n"))
}

// write prints the report as one line of JSON or as a table.
func (r *report) write(w io.Writer, jsonOut bool) error {
	if !jsonOut {
		r.writeHuman(w)
		return nil
	}
	// MarshalJSON itself, not json.Marshal, which would compact its output
	// escaping the targets' "<=" into "\u003c=".
	line, err := r.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encode %s: %w", r.scenario, err)
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// writeHuman prints one scenario as an aligned table.
func (r *report) writeHuman(w io.Writer) {
	fmt.Fprintf(w, "\n== %s  (%s)\n", r.scenario, r.params)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range r.figures {
		verdict := ""
		if f.met != nil {
			verdict = "target " + f.target + " " + f.unit + ": " + metWord(*f.met)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.key, formatValue(f.value), f.unit, verdict)
	}
	tw.Flush()
	for _, n := range r.notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// metWord is a target's verdict as the tables print it.
func metWord(met bool) string {
	if met {
		return "met"
	}
	return "NOT MET"
}

// formatValue prints a figure's value, floats to three decimals.
func formatValue(v any) string {
	switch x := v.(type) {
	case float64:
		return fmt.Sprintf("%.3f", round(x))
	default:
		return fmt.Sprint(v)
	}
}

// writeSummary prints every target of every report in one table.
func writeSummary(w io.Writer, reports []*report) {
	var rows []string
	for _, r := range reports {
		for _, f := range r.figures {
			if f.met != nil {
				rows = append(rows, fmt.Sprintf("  %s\t%s\t%s %s\t%s %s\t%s",
					r.scenario, f.key, formatValue(f.value), f.unit, f.target, f.unit, metWord(*f.met)))
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\n== targets")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  scenario\tfigure\tmeasured\ttarget\tverdict")
	fmt.Fprintln(tw, strings.Join(rows, "\n"))
	tw.Flush()
}
