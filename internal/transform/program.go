package transform

import (
	"context"
	"fmt"
	"unicode/utf8"
)

// Program is a transformation that compiled: its code parses, its top
// level runs within the limits and defines handler. It holds the engine's
// bytecode, so that a run does not parse the code again.
type Program struct {
	bytecode []byte
}

// Size is the bytecode's size in bytes, what a Cache counts.
func (p *Program) Size() int { return len(p.bytecode) }

// Compile checks code and compiles it. A code that breaks a rule fails
// with an *Error (its line and column for a syntax error or a throw).
func (s *Sandbox) Compile(ctx context.Context, code string) (*Program, error) {
	switch {
	case len(code) > s.limits.MaxCodeBytes:
		return nil, &Error{Kind: KindCodeTooLarge, Message: fmt.Sprintf(
			"the code is %d bytes, more than the %d allowed", len(code), s.limits.MaxCodeBytes)}
	case !utf8.ValidString(code):
		return nil, &Error{Kind: KindCodeTooLarge, Message: "the code must be UTF-8 text"}
	}
	res, err := s.engine.call(ctx, "wh_compile", [][]byte{[]byte(code)},
		[]uint64{uint64(s.heapLimit()), stackCheckBytes}, s.limits.MemoryPerCall)
	if err != nil {
		return nil, err
	}
	switch res.status {
	case statusOK:
		return &Program{bytecode: res.out}, nil
	case statusThrown:
		return nil, thrownError(res.out, s.limits, true)
	case statusNoHandler:
		return nil, errNoHandler()
	default:
		return nil, s.statusError(res)
	}
}

// heapLimit is QuickJS's own bound on its heap, below the instance's
// memory (which holds the stack and the engine's data too), so that a
// script at the bound mostly gets an exception rather than a trap.
func (s *Sandbox) heapLimit() int {
	return s.limits.MemoryPerCall - stackBytes - 1<<20
}

func errNoHandler() *Error {
	return &Error{Kind: KindNoHandler, Message: "the code must define function handler(webhook)"}
}

// statusError is the *Error of a status with no output to read.
func (s *Sandbox) statusError(res result) error {
	switch res.status {
	case statusNoMemory:
		return &Error{Kind: KindMemoryLimit, Message: memoryMessage(s.limits)}
	case statusUndefined:
		return &Error{Kind: KindShape, Message: "handler must return the webhook object; it returned undefined"}
	case statusTooLarge:
		return &Error{Kind: KindOutputTooLarge, Message: fmt.Sprintf(
			"handler returned %s bytes of JSON, more than the %d allowed", res.out, s.maxReturned())}
	}
	return fmt.Errorf("transform: the engine ended with status %d", res.status)
}
