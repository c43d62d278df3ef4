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
	"slices"
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
	// root is the handler NewHandler was given; ops are the WithAttrs and
	// WithGroup calls made since, in order. They are applied to root at
	// the first record handled (derive): a logger made for each attempt
	// with its ids (slog.Logger.With) costs a slice until it logs, where
	// slog's handlers format the attributes at once, and at the usual warn
	// level most such loggers never log.
	root     slog.Handler
	ops      []derivation
	throttle *throttle

	once sync.Once
	// next is root with ops applied; attrsText is the text of the
	// attributes ops added, which a record's own attributes do not show.
	next      slog.Handler
	attrsText string
}

// derivation is one WithAttrs (attrs) or WithGroup (group) call.
type derivation struct {
	attrs []slog.Attr
	group string
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
	return &Handler{root: next, throttle: &throttle{
		interval: interval, services: services, now: now,
		last: map[string]time.Time{}, held: map[string]int{},
	}}
}

// Enabled is the next handler's, which attributes and groups do not
// change.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.root.Enabled(ctx, level)
}

// derive applies ops to root, once.
func (h *Handler) derive() (next slog.Handler, attrsText string) {
	h.once.Do(func() {
		n := h.root
		var b strings.Builder
		for _, d := range h.ops {
			if d.group != "" {
				n = n.WithGroup(d.group)
				continue
			}
			n = n.WithAttrs(d.attrs)
			for _, a := range d.attrs {
				writeAttr(&b, a)
			}
		}
		h.next, h.attrsText = n, b.String()
	})
	return h.next, h.attrsText
}

// Handle passes r on, unless it is about a service whose last record
// passed less than an interval ago.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	next, attrsText := h.derive()
	if r.Level < slog.LevelWarn {
		// Clients report an outage as warnings or errors; information
		// (one line per request) passes without being searched.
		return next.Handle(ctx, r)
	}
	svc, ok := h.about(r, attrsText)
	if !ok {
		return next.Handle(ctx, r)
	}
	held, pass := h.throttle.admit(svc)
	if !pass {
		return nil
	}
	r = r.Clone()
	r.AddAttrs(slog.String("unreachable", svc.Name), slog.String("variable", svc.Variable), slog.String("addr", svc.Addr),
		slog.Int("repeated", held), slog.String("repeats_logged_every", h.throttle.interval.String()))
	return next.Handle(ctx, r)
}

// WithAttrs is the next handler's, made when it first handles a record,
// sharing the throttle.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return &Handler{root: h.root, ops: append(slices.Clip(h.ops), derivation{attrs: attrs}), throttle: h.throttle}
}

// WithGroup is the next handler's, made when it first handles a record,
// sharing the throttle.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &Handler{root: h.root, ops: append(slices.Clip(h.ops), derivation{group: name}), throttle: h.throttle}
}

// about returns the service a record mentions, by its address anywhere in
// the message or the attributes: clients wrap their dial errors in their
// own words, but every one of them keeps the address.
func (h *Handler) about(r slog.Record, attrsText string) (Service, bool) {
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(attrsText)
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
