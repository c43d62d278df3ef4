package invalid_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/webhookd/webhookd/internal/invalid"
)

func TestText(t *testing.T) {
	for _, c := range []struct {
		s, rule string
	}{
		{"plain", ""}, {"é €😀", ""}, {"\uFFFD", ""}, {"", ""},
		{"a\x00b", invalid.RuleNUL}, {"\x00", invalid.RuleNUL},
		{"a\xffb", invalid.RuleNotUTF8}, {"\xc3", invalid.RuleNotUTF8}, {"\xed\xa0\x80", invalid.RuleNotUTF8},
	} {
		got := invalid.Text("description", c.s)
		switch {
		case c.rule == "" && got != nil:
			t.Errorf("Text(%q) = %v, want nil", c.s, got)
		case c.rule != "" && (got == nil || got.Rule != c.rule || got.Param != "description" || got.Missing):
			t.Errorf("Text(%q) = %#v, want rule %s on description", c.s, got, c.rule)
		}
	}
}

// TestJSON names the value at fault, however deep, and the rule.
func TestJSON(t *testing.T) {
	for _, c := range []struct {
		doc, param, rule string
	}{
		{`{"foo":{"bar":"a\u0000b"}}`, "payload.foo.bar", invalid.RuleNUL},
		{`{"foo":{"bar":"a\U0000b"}}`, "", ""}, // not JSON: another rule's
		{"{\"foo\":{\"bar\":\"a\xffb\"}}", "payload.foo.bar", invalid.RuleNotUTF8},
		{"{\"foo\":{\"bar\":\"a\x00b\"}}", "", ""}, // a raw NUL is not JSON: another rule's
		{`{"items":[1,{"id":"x"},"\u0000"]}`, "payload.items[2]", invalid.RuleNUL},
		{`{"items":[[1],[2,"\ud800"]]}`, "payload.items[1][1]", invalid.RuleNotUTF8},
		{`{"a":"\udc00"}`, "payload.a", invalid.RuleNotUTF8},
		{`{"a":"\ud800\u0041"}`, "payload.a", invalid.RuleNotUTF8},
		{`{"a":"\ud800"}`, "payload.a", invalid.RuleNotUTF8},
		{`{"a":"\uD83D\uDE00 ok","b":"\\u0000 is text","c":"\\\\\\ud800"}`, "", ""},
		{`{"a":{"k\u0000":1}}`, "payload.a", invalid.RuleNUL},
		{"{\"a\":{\"k\xfe\":1}}", "payload.a", invalid.RuleNotUTF8},
		{`{"\u0000":1}`, "payload", invalid.RuleNUL},
		{`{"a":1,"b":[true,null,2.5e3,{}],"c":"\u0000"}`, "payload.c", invalid.RuleNUL},
		{`{"a":"\u0000","b":"\ud800"}`, "payload.a", invalid.RuleNUL}, // the first in document order
		{`{"a":"é","b":"\u00e9"}`, "", ""},
		{`"\u0000"`, "payload", invalid.RuleNUL},
		{`{"a":"x\\\ud800"}`, "payload.a", invalid.RuleNotUTF8}, // an escaped backslash, then the escape
		{`{"a":"\ud83d"}`, "payload.a", invalid.RuleNotUTF8},
		{`{"a":"\ud83d\ude00\ud83d\ude00","b":["\uDBFF\uDFFF"]}`, "", ""},
		{`{"a":"\\ud800"}`, "", ""}, // text, not an escape
	} {
		got := invalid.JSON("payload", []byte(c.doc))
		switch {
		case c.rule == "" && got != nil:
			t.Errorf("JSON(%q) = %v, want nil", c.doc, got)
		case c.rule != "" && got == nil:
			t.Errorf("JSON(%q) = nil, want %s at %s", c.doc, c.rule, c.param)
		case c.rule != "" && (got.Rule != c.rule || got.Param != c.param):
			t.Errorf("JSON(%q) = %s at %s, want %s at %s", c.doc, got.Rule, got.Param, c.rule, c.param)
		}
	}
}

// FuzzFindText holds FindText to its contract on arbitrary documents: on
// JSON, a document it passes has every key and string UTF-8 without NUL,
// and a fault it finds is at a path that exists and, for a NUL, holds one.
func FuzzFindText(f *testing.F) {
	for _, s := range []string{
		`{"foo":{"bar":"a\u0000b"}}`, "{\"a\":\"\xff\"}", `{"a":["\ud800"]}`, `{"a":"\ud83d\ude00"}`,
		`{"a":{"\u0000":1}}`, `[1,"x",{"y":"\u0000"}]`, `"\\u0000"`, `{"a":"\\\ud800"}`, `{`, ``, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		fault := invalid.FindText(doc)
		var v any
		if json.Unmarshal(doc, &v) != nil {
			return // not JSON: FindText may answer either way
		}
		if fault == nil {
			if !utf8.Valid(doc) {
				t.Fatalf("passed %q, not UTF-8", doc)
			}
			if hasNUL(v) {
				t.Fatalf("passed %q, which holds a NUL", doc)
			}
			// encoding/json decodes a lone surrogate as U+FFFD: any more
			// of those than the document writes is one that was passed.
			written := bytes.Count(doc, []byte("\uFFFD")) + bytes.Count(bytes.ToLower(doc), []byte(`\ufffd`))
			if replaced(v) > written {
				t.Fatalf("passed %q, which holds a lone surrogate", doc)
			}
			return
		}
		if duplicateKeys(doc) {
			return // the decoded document lost the value at fault
		}
		at, ok := walk(v, fault.Path)
		if !ok {
			t.Fatalf("fault of %q at %v, which is not in it", doc, fault.Path)
		}
		if fault.InKey {
			m, isObject := at.(map[string]any)
			if _, has := m[fault.Key]; !isObject || !has {
				t.Fatalf("key fault of %q at %v: no key %q there", doc, fault.Path, fault.Key)
			}
			if fault.Rule == invalid.RuleNUL && !strings.Contains(fault.Key, "\x00") {
				t.Fatalf("NUL fault of %q in key %q", doc, fault.Key)
			}
			return
		}
		s, isString := at.(string)
		if !isString {
			t.Fatalf("fault of %q at %v, a %T", doc, fault.Path, at)
		}
		if fault.Rule == invalid.RuleNUL && !strings.Contains(s, "\x00") {
			t.Fatalf("NUL fault of %q at %v, which holds %q", doc, fault.Path, s)
		}
	})
}

// hasNUL tells whether any key or string of a decoded document holds NUL.
func hasNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, "\x00")
	case []any:
		for _, e := range x {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.Contains(k, "\x00") || hasNUL(e) {
				return true
			}
		}
	}
	return false
}

// replaced counts the U+FFFD of the keys and strings of a decoded
// document.
func replaced(v any) int {
	switch x := v.(type) {
	case string:
		return strings.Count(x, "\uFFFD")
	case []any:
		n := 0
		for _, e := range x {
			n += replaced(e)
		}
		return n
	case map[string]any:
		n := 0
		for k, e := range x {
			n += strings.Count(k, "\uFFFD") + replaced(e)
		}
		return n
	}
	return 0
}

// walk follows path into a decoded document.
func walk(v any, path []any) (any, bool) {
	for _, step := range path {
		switch s := step.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[s]; !ok {
				return nil, false
			}
		case int:
			l, ok := v.([]any)
			if !ok || s < 0 || s >= len(l) {
				return nil, false
			}
			v = l[s]
		default:
			return nil, false
		}
	}
	return v, true
}

// duplicateKeys tells whether an object of the JSON document doc repeats
// a key: then the decoded document holds only the last value, which need
// not be the one FindText found at fault.
func duplicateKeys(doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		keys    map[string]bool // nil in an array
		keyNext bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.keys != nil && top.keyNext {
				k, _ := tok.(string)
				if top.keys[k] {
					return true
				}
				top.keys[k], top.keyNext = true, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, keyNext: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 { // a value ended: an object's next token is a key
			stack[len(stack)-1].keyNext = true
		}
	}
}

func TestQuoteCutsLongValues(t *testing.T) {
	if got := invalid.Quote("abc"); got != `"abc"` {
		t.Errorf("Quote(abc) = %s", got)
	}
	if got, want := invalid.Quote(strings.Repeat("y", 65)), `"`+strings.Repeat("y", 64)+`…"`; got != want {
		t.Errorf("Quote of 65 characters = %s, want %s", got, want)
	}
}

func TestUUIDTakesOnlyTheHyphenatedForm(t *testing.T) {
	const id = "0193a5e0-1111-7a2b-8c3d-4e5f6a7b8c9d"
	if got, bad := invalid.UUID("id", "id_not_uuid", id); bad != nil || got.String() != id {
		t.Fatalf("UUID(%s) = %s, %v", id, got, bad)
	}
	for _, s := range []string{"", "nope", "{" + id + "}", "urn:uuid:" + id, strings.ReplaceAll(id, "-", "")} {
		_, bad := invalid.UUID("key_id", "r", s)
		if want := (invalid.Error{Param: "key_id", Rule: "r", Message: "key_id must be a UUID."}); bad == nil || *bad != want {
			t.Errorf("UUID(%q) refusal = %+v, want %+v", s, bad, want)
		}
	}
}
