package transform

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrorCode is the API's and the attempt log's code for every *Error.
const ErrorCode = "transformation_error"

// Kind names the rule a transformation broke.
type Kind string

// The kinds of *Error.
const (
	// KindCodeTooLarge: the code is over MaxCodeBytes, or not UTF-8 text.
	KindCodeTooLarge Kind = "code_too_large"
	// KindSyntax: the code does not parse.
	KindSyntax Kind = "syntax"
	// KindNoHandler: the code defines no function handler.
	KindNoHandler Kind = "no_handler"
	// KindThrown: the code threw (its top level or handler).
	KindThrown Kind = "thrown"
	// KindShape: handler returned something other than the webhook object.
	KindShape Kind = "shape"
	// KindOutputTooLarge: the returned webhook or its payload is too large.
	KindOutputTooLarge Kind = "output_too_large"
	// KindURL: the returned url breaks the subscription URL rules.
	KindURL Kind = "url"
	// KindHeaders: the returned headers break the custom header rules.
	KindHeaders Kind = "headers"
	// KindTimeLimit: the call used up its CPU (or wall) time.
	KindTimeLimit Kind = "time_limit"
	// KindMemoryLimit: the call used up its memory.
	KindMemoryLimit Kind = "memory_limit"
	// KindStackLimit: the call recursed too deep.
	KindStackLimit Kind = "stack_limit"
)

// Error is why a transformation failed: the merchant's code broke a rule
// or a limit. Its text is written for the merchant (it names no Go
// internals); the API and the attempt log show it under ErrorCode. Any
// other error from this package is webhookd's own failure, not the code's.
type Error struct {
	// Kind is the rule broken.
	Kind Kind
	// Line and Column locate the error in the code, from 1; 0 when the
	// error has no place in it (a limit hit in the engine, a wrong shape).
	Line, Column int
	// Message says what is wrong.
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Message)
	}
	return e.Message
}

// maxMessageBytes bounds the text of a thrown error: the script writes
// it, and the attempt log keeps it.
const maxMessageBytes = 1024

// codeFrame is a frame of the merchant's code in an engine stack:
// engine/shim.c names the code handler.js.
var codeFrame = regexp.MustCompile(`handler\.js:(\d+):(\d+)`)

// thrownError turns what the engine reports of an exception (its text, a
// NUL, its stack) into an *Error.
func thrownError(out []byte, l Limits, compiling bool) *Error {
	text, stack, _ := strings.Cut(string(out), "\x00")
	e := &Error{Kind: KindThrown, Message: shown(text)}
	if m := codeFrame.FindStringSubmatch(stack); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Column, _ = strconv.Atoi(m[2])
	}
	switch {
	case text == "InternalError: out of memory":
		e.Kind, e.Message = KindMemoryLimit, memoryMessage(l)
	case text == "InternalError: stack overflow" || text == "SyntaxError: stack overflow":
		e.Kind, e.Message = KindStackLimit, "the code recursed too deep (stack overflow)"
	case compiling && strings.HasPrefix(text, "SyntaxError: "):
		e.Kind = KindSyntax
	}
	return e
}

func memoryMessage(l Limits) string {
	return fmt.Sprintf("the code used more than its %d MiB of memory", l.MemoryPerCall>>20)
}

// shown makes a script's text fit to show: valid UTF-8, no control
// characters but newlines and tabs, at most maxMessageBytes.
func shown(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return -1
		}
		return r
	}, s)
	if len(s) <= maxMessageBytes {
		return s
	}
	cut := maxMessageBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
