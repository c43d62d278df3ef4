// Package outagelog keeps a process's log readable while a backing service
// is unreachable: every client of it (connection pools, queue pollers,
// health checks) reports the same dial error several times a second, which
// buries everything else and names neither the service nor the setting
// that points at it.
package outagelog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Service is a backing service whose unreachability this package tames.
type Service struct {
	// Name is how log lines call the service ("Redis").
	Name string
	// Variable is the setting that points at it ("WEBHOOKD_REDIS_URL").
	Variable string
	// Addr is its address as its clients' errors spell it: host:port, or a
	// socket path.
	Addr string
}

// Handler passes records to the next handler, except that the warnings
// and errors about a Service (those that mention its address) pass at most
// once per interval, each naming the service's variable and address and counting
// the records held back since the last one.
type Handler struct {
	next slog.Handler
	// attrsText is the text of the attributes added by WithAttrs, which a
	// record's own attributes do not show.
	attrsText string
	throttle  *throttle
}

// throttle is the state that a Handler shares with those derived from it
// by WithAttrs and WithGroup: they write to one log.
type throttle struct {
	interval time.Duration
	services []Service
	now      func() time.Time

	mu sync.Mutex
	// last is when each service's last record passed; held counts the
	// records held back since.
	last map[string]time.Time
	held map[string]int
}

// NewHandler returns a Handler writing to next that lets one record per
// service through per interval.
func NewHandler(next slog.Handler, interval time.Duration, services ...Service) *Handler {
	return newHandler(next, interval, time.Now, services)
}

func newHandler(next slog.Handler, interval time.Duration, now func() time.Time, services []Service) *Handler {
	return &Handler{next: next, throttle: &throttle{
		interval: interval, services: services, now: now,
		last: map[string]time.Time{}, held: map[string]int{},
	}}
}

// Enabled is the next handler's.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle passes r on, unless it is about a service whose last record
// passed less than an interval ago.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		// Clients report an outage as warnings or errors; information
		// (one line per request) passes without being searched.
		return h.next.Handle(ctx, r)
	}
	svc, ok := h.about(r)
	if !ok {
		return h.next.Handle(ctx, r)
	}
	held, pass := h.throttle.admit(svc)
	if !pass {
		return nil
	}
	r = r.Clone()
	r.AddAttrs(slog.String("unreachable", svc.Name), slog.String("variable", svc.Variable), slog.String("addr", svc.Addr),
		slog.Int("repeated", held), slog.String("repeats_logged_every", h.throttle.interval.String()))
	return h.next.Handle(ctx, r)
}

// WithAttrs is the next handler's, sharing the throttle.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrsText)
	for _, a := range attrs {
		writeAttr(&b, a)
	}
	return &Handler{next: h.next.WithAttrs(attrs), attrsText: b.String(), throttle: h.throttle}
}

// WithGroup is the next handler's, sharing the throttle.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), attrsText: h.attrsText, throttle: h.throttle}
}

// about returns the service a record mentions, by its address anywhere in
// the message or the attributes: clients wrap their dial errors in their
// own words, but every one of them keeps the address.
func (h *Handler) about(r slog.Record) (Service, bool) {
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.attrsText)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&b, a)
		return true
	})
	text := b.String()
	for _, s := range h.throttle.services {
		if s.Addr != "" && strings.Contains(text, s.Addr) {
			return s, true
		}
	}
	return Service{}, false
}

// writeAttr appends an attribute's value, groups included.
func writeAttr(b *strings.Builder, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			writeAttr(b, g)
		}
		return
	}
	b.WriteByte(' ')
	fmt.Fprint(b, v.Any())
}

// admit tells whether a record about svc passes now and, if so, how many
// were held back since the last one that did.
func (t *throttle) admit(svc Service) (held int, pass bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if last, seen := t.last[svc.Name]; seen && now.Sub(last) < t.interval {
		t.held[svc.Name]++
		return 0, false
	}
	held = t.held[svc.Name]
	t.last[svc.Name] = now
	t.held[svc.Name] = 0
	return held, true
}
