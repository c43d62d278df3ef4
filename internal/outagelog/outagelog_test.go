package outagelog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

func TestRepeatedOutageLinesAreThrottled(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	redis := Service{Name: "Redis", Variable: "WEBHOOKD_REDIS_URL", Addr: "127.0.0.1:6379"}
	h := newHandler(slog.NewJSONHandler(&out, nil), 5*time.Second, func() time.Time { return now }, []Service{redis})
	logger := slog.New(h)
	asynq := logger.With("component", "asynq")

	steps := []struct {
		log  func()
		want string // the line's message, or "" when it is held back
		// outage is true for a line about Redis; held is then the count
		// of lines it reports held back.
		outage bool
		held   int
	}{
		{func() { logger.Warn("dequeue", "error", "dial tcp 127.0.0.1:6379: connect: connection refused") }, "dequeue", true, 0},
		{func() { asynq.Error("heartbeat: dial tcp 127.0.0.1:6379: connect: connection refused") }, "", true, 0},
		{func() { logger.Warn("unrelated") }, "unrelated", false, 0},
		{func() { logger.Info("information", "error", "127.0.0.1:6379 refused") }, "information", false, 0},
		{func() { logger.Warn("pool", slog.Group("g", "err", "127.0.0.1:6379 refused")) }, "", true, 0},
		{func() { now = now.Add(5 * time.Second); asynq.Error("scheduler: 127.0.0.1:6379 refused") }, "scheduler: 127.0.0.1:6379 refused", true, 2},
	}
	for i, s := range steps {
		out.Reset()
		s.log()
		if s.want == "" {
			if out.Len() != 0 {
				t.Errorf("step %d: got %s, want the line held back", i, out.String())
			}
			continue
		}
		var line map[string]any
		if err := json.Unmarshal(out.Bytes(), &line); err != nil {
			t.Fatalf("step %d: %v: %s", i, err, out.String())
		}
		if line["msg"] != s.want {
			t.Errorf("step %d: msg = %v, want %q", i, line["msg"], s.want)
		}
		if s.outage && (line["variable"] != "WEBHOOKD_REDIS_URL" || line["repeated"] != float64(s.held)) {
			t.Errorf("step %d: %s; want variable WEBHOOKD_REDIS_URL and repeated %d", i, out.String(), s.held)
		}
		if _, tagged := line["variable"]; !s.outage && tagged {
			t.Errorf("step %d: %s; want the line as logged", i, out.String())
		}
	}
}

// Attributes and groups added with With and WithGroup reach the line as
// slog's own handler writes them, in their order, though the Handler
// applies them only when a record is first handled; an address given only
// by With still marks a line as an outage's.
func TestDerivedLoggersWriteAsSlogDoes(t *testing.T) {
	chains := []struct {
		name   string
		derive func(*slog.Logger) *slog.Logger
	}{
		{"attributes", func(l *slog.Logger) *slog.Logger { return l.With("delivery_id", "d1").With("attempt", 2) }},
		{"a group then attributes", func(l *slog.Logger) *slog.Logger { return l.WithGroup("g").With("a", 1).With("b", "x") }},
		{"attributes, a group, more", func(l *slog.Logger) *slog.Logger { return l.With("a", 1).WithGroup("g").With("b", 2) }},
		{"nothing", func(l *slog.Logger) *slog.Logger { return l.With().WithGroup("") }},
	}
	for _, c := range chains {
		t.Run(c.name, func(t *testing.T) {
			var want, got bytes.Buffer
			plain := slog.New(slog.NewJSONHandler(&want, &slog.HandlerOptions{ReplaceAttr: dropTime}))
			throttled := slog.New(newHandler(slog.NewJSONHandler(&got, &slog.HandlerOptions{ReplaceAttr: dropTime}),
				time.Second, time.Now, nil))
			c.derive(plain).Warn("m", "c", 3)
			c.derive(throttled).Warn("m", "c", 3)
			if got.String() != want.String() {
				t.Errorf("got %s\nwant %s", got.String(), want.String())
			}
		})
	}
	var out bytes.Buffer
	redis := Service{Name: "Redis", Variable: "WEBHOOKD_REDIS_URL", Addr: "127.0.0.1:6379"}
	logger := slog.New(newHandler(slog.NewJSONHandler(&out, nil), 5*time.Second, time.Now, []Service{redis}))
	logger.With("addr", "127.0.0.1:6379").Warn("dial failed")
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil || line["variable"] != "WEBHOOKD_REDIS_URL" {
		t.Errorf("an outage named by With only: %s (%v); want it tagged", out.String(), err)
	}
}

// dropTime leaves the time out of a line, so that two lines compare.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
