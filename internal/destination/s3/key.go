package s3

import (
	"fmt"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
)

// DefaultKeyTemplate is where an object goes when the destination names
// no key template: a folder of each event type, then of each day.
const DefaultKeyTemplate = "{event_type}/{date}/{delivery_id}.json"

// MaxKeyTemplate bounds a key template's length.
const MaxKeyTemplate = 512

// maxKey is S3's bound of an object key, in bytes: a key longer once
// expanded is refused before sending.
const maxKey = 1024

// batchType is what {event_type} is for a batch, which has no one type.
const batchType = "batch"

// placeholders are the names a key template may hold, each between
// braces; anything else between braces is refused.
var placeholders = []string{"event_type", "event_id", "delivery_id", "date", "hour"}

// KeyTemplate is a parsed key template: literal parts and placeholders,
// in order.
type KeyTemplate struct {
	parts []part
}

// part is a literal, or a placeholder when name is set.
type part struct {
	literal string
	name    string
}

// ParseKeyTemplate checks a key template under param: at most
// MaxKeyTemplate characters; placeholders only those allowed; literal
// parts only letters, digits and / _ . -; no "..", no "." segment, no
// empty segment, not beginning or ending with "/"; and {delivery_id} or
// {event_id} in it, so that two deliveries never write one object. A
// refusal never quotes the value.
func ParseKeyTemplate(param, v string) (KeyTemplate, error) {
	refuse := func(why string) (KeyTemplate, error) {
		return KeyTemplate{}, invalid.Value(param, "destination_key_template_invalid", param+" "+why)
	}
	switch {
	case v == "":
		return refuse("must not be empty.")
	case len(v) > MaxKeyTemplate:
		return refuse(fmt.Sprintf("must be at most %d characters.", MaxKeyTemplate))
	case strings.HasPrefix(v, "/") || strings.HasSuffix(v, "/"):
		return refuse(`must not begin or end with "/".`)
	case strings.Contains(v, ".."):
		return refuse(`must not hold "..".`)
	}
	for seg := range strings.SplitSeq(v, "/") {
		if seg == "" || seg == "." {
			return refuse(`must not hold an empty or "." path segment.`)
		}
	}
	var t KeyTemplate
	rest := v
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			open = len(rest)
		}
		if lit := rest[:open]; lit != "" {
			if strings.ContainsFunc(lit, func(r rune) bool { return !literalChar(r) }) {
				return refuse("may hold only letters, digits, / _ . - and the placeholders " + placeholderList() + ".")
			}
			t.parts = append(t.parts, part{literal: lit})
		}
		rest = rest[open:]
		if rest == "" {
			break
		}
		end := strings.IndexByte(rest, '}')
		if end < 0 || !slices.Contains(placeholders, rest[1:end]) {
			return refuse("may hold only the placeholders " + placeholderList() + ".")
		}
		t.parts = append(t.parts, part{name: rest[1:end]})
		rest = rest[end+1:]
	}
	if !slices.ContainsFunc(t.parts, func(p part) bool { return p.name == "delivery_id" || p.name == "event_id" }) {
		return refuse("must hold {delivery_id} or {event_id}, so that two deliveries never write the same object.")
	}
	return t, nil
}

func placeholderList() string {
	names := make([]string, len(placeholders))
	for i, p := range placeholders {
		names[i] = "{" + p + "}"
	}
	return strings.Join(names, " ")
}

// literalChar is a character a key template's literal parts, and so a
// key, may hold: safe in a URL path, a file name and S3's console.
func literalChar(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '/' || r == '_' || r == '.' || r == '-'
}

// valueChar is a character an expanded value keeps: an event type's
// (letters, digits, _ . -), never "/", so that a value adds no folder.
func valueChar(r rune) bool { return r != '/' && literalChar(r) }

// Expand is m's object key.
func (t KeyTemplate) Expand(m destination.Message) string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.name == "" {
			b.WriteString(p.literal)
			continue
		}
		b.WriteString(sanitize(value(p.name, m)))
	}
	return b.String()
}

// value is a placeholder's value for m, before sanitize.
func value(name string, m destination.Message) string {
	at := m.SignedAt.UTC()
	switch name {
	case "event_type":
		if m.EventType == "" {
			return batchType
		}
		return m.EventType
	case "event_id":
		return m.EventID
	case "delivery_id":
		return m.DeliveryID
	case "date":
		return at.Format("2006-01-02")
	case "hour":
		return at.Format("15")
	}
	return ""
}

// sanitize makes v safe in a key: each character outside valueChar
// becomes "_", and so does a "." that begins or ends v or follows
// another, so that no expansion makes a ".." or a "." segment, even
// beside a literal "."; an empty value is "_", so that no segment is
// empty.
func sanitize(v string) string {
	var b strings.Builder
	prevDot := false
	for _, r := range v {
		c := byte('_')
		if r < 0x80 && valueChar(r) {
			c = byte(r)
		}
		if c == '.' && (b.Len() == 0 || prevDot) {
			c = '_'
		}
		prevDot = c == '.'
		b.WriteByte(c)
	}
	s := b.String()
	switch {
	case s == "":
		return "_"
	case strings.HasSuffix(s, "."):
		return s[:len(s)-1] + "_"
	}
	return s
}
