package invalid

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The rules of text that Postgres can store. A text or jsonb value holds
// neither the NUL character nor anything that is not Unicode, and webhookd
// refuses both rather than store an altered value or fail the statement.
const (
	// RuleNUL is a string or object key holding U+0000, sent raw or as
	// the JSON escape \u0000.
	RuleNUL = "text_nul"
	// RuleNotUTF8 is a string or object key that is not valid UTF-8, or
	// holds a JSON escape of a lone surrogate (\ud800), which no UTF-8
	// encodes; encoding/json would quietly replace either with U+FFFD.
	RuleNotUTF8 = "text_not_utf8"
)

// Text checks one string bound for a Postgres text or jsonb value: it is
// nil when s is UTF-8 without NUL, else the refusal naming param.
func Text(param, s string) *Error {
	switch {
	case !utf8.ValidString(s):
		return Value(param, RuleNotUTF8, param+" must be valid UTF-8.")
	case strings.IndexByte(s, 0) >= 0:
		return Value(param, RuleNUL, param+` must not contain the NUL character (\u0000).`)
	}
	return nil
}

// TextFault is where a JSON document breaks the rule of Text.
type TextFault struct {
	// Path leads to the value at fault from the document's root: object
	// keys (string) and array indexes (int). When the fault is in an
	// object key, Path leads to that object, and Key is set.
	Path []any
	// InKey tells that the fault is in an object key rather than a value.
	InKey bool
	// Key is the key at fault as encoding/json decodes it (invalid UTF-8
	// and lone surrogates as U+FFFD); "" unless InKey.
	Key string
	// Rule is RuleNUL or RuleNotUTF8.
	Rule string
}

// FindText returns the first object key or string of the JSON document
// doc, in document order, that breaks the rule of Text, or nil when there
// is none (or when doc is not JSON: that is another rule's to refuse). A
// document that is valid UTF-8 and holds no \u0000 and no surrogate escape
// out of a pair is passed in a scan, without decoding it.
func FindText(doc []byte) *TextFault {
	if utf8.Valid(doc) && !bytes.Contains(doc, []byte(`\u0000`)) && !maybeLoneSurrogate(doc) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var stack []frame // the containers open, outermost first
	path := func(n int) []any {
		p := make([]any, 0, n)
		for _, f := range stack[:n] {
			p = append(p, f.step())
		}
		return p
	}
	from := int64(0)
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		raw := doc[from:dec.InputOffset()]
		from = dec.InputOffset()
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, frame{object: tok == json.Delim('{'), keyNext: true})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return nil
			}
			stack[len(stack)-1].advance()
			continue
		}
		if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].keyNext {
			key, _ := tok.(string)
			if rule := rawTextRule(raw); rule != "" {
				return &TextFault{Path: path(len(stack) - 1), InKey: true, Key: key, Rule: rule}
			}
			stack[len(stack)-1].key, stack[len(stack)-1].keyNext = key, false
			continue
		}
		if _, ok := tok.(string); ok {
			if rule := rawTextRule(raw); rule != "" {
				return &TextFault{Path: path(len(stack)), Rule: rule}
			}
		}
		if len(stack) == 0 {
			return nil // a document that is one scalar
		}
		stack[len(stack)-1].advance()
	}
}

// frame is an open container of FindText's walk, and where in it the
// walk is.
type frame struct {
	object  bool
	keyNext bool   // in an object: the next token is a key
	key     string // in an object: the key of the value being read
	index   int    // in an array: the index of the value being read
}

// step is the path step of the value being read.
func (f *frame) step() any {
	if f.object {
		return f.key
	}
	return f.index
}

// advance moves past the value just read.
func (f *frame) advance() {
	if f.object {
		f.keyNext = true
	} else {
		f.index++
	}
}

// maybeLoneSurrogate tells whether doc may hold a lone surrogate escape:
// a \uD800-\uDBFF not followed at once by a \uDC00-\uDFFF, or one of the
// latter not preceded by one of the former. A pair (an emoji, as encoders
// that escape every non-ASCII character write it) passes; a false alarm
// (an escaped backslash before "ud800") only costs FindText's walk.
func maybeLoneSurrogate(doc []byte) bool {
	for i := 0; ; {
		j := bytes.Index(doc[i:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += j
		r, ok := hex4(doc, i+2)
		switch {
		case !ok || r < 0xD800 || r > 0xDFFF:
			i += 2
		case r >= 0xDC00:
			return true // a low surrogate first
		default:
			low, ok := hex4(doc, i+8)
			if !ok || doc[i+6] != '\\' || doc[i+7] != 'u' || low < 0xDC00 || low > 0xDFFF {
				return true
			}
			i += 12
		}
	}
}

// rawTextRule is the rule that the raw bytes of one JSON string token
// (its quotes, and whatever separators precede it) break, or "".
func rawTextRule(raw []byte) string {
	if !utf8.Valid(raw) {
		return RuleNotUTF8
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] == 0 {
			return RuleNUL
		}
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		i++
		if raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw, i+1)
		if !ok {
			continue
		}
		i += 4
		switch {
		case r == 0:
			return RuleNUL
		case r >= 0xDC00 && r <= 0xDFFF:
			return RuleNotUTF8 // a low surrogate without its high one
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return RuleNotUTF8
			}
			low, ok := hex4(raw, i+3)
			if !ok || low < 0xDC00 || low > 0xDFFF {
				return RuleNotUTF8
			}
			i += 6
		}
	}
	return ""
}

// hex4 reads the four hex digits of a \u escape at b[at:].
func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(n), err == nil
}

// Below names a path of FindText under param, as the HTTP API names the
// parts of a field: param.key for an object's member, param[i] for an
// array's element.
func Below(param string, path []any) string {
	var b strings.Builder
	b.WriteString(param)
	for _, step := range path {
		switch s := step.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(s) + "]")
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		}
	}
	return b.String()
}

// Refusal is the refusal of f, its value named name (Below or the like).
func (f *TextFault) Refusal(name string) *Error {
	what := name
	if f.InKey {
		what = "The keys of " + name
		if name == "" {
			what = "The field names"
		}
	}
	if f.Rule == RuleNUL {
		return Value(name, RuleNUL, what+` must not contain the NUL character (\u0000).`)
	}
	return Value(name, RuleNotUTF8, what+" must be valid UTF-8 (no invalid bytes, no lone surrogate escape such as \\ud800).")
}

// JSON checks every object key and string of the JSON document doc, which
// is the value of param: the refusal names the value at fault below param
// (payload.customer.name, payload.items[2]); a bad key names the object
// that holds it. It is nil when doc breaks no rule of Text.
func JSON(param string, doc []byte) *Error {
	f := FindText(doc)
	if f == nil {
		return nil
	}
	return f.Refusal(Below(param, f.Path))
}
