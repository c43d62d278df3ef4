// Package transform is a placeholder until the sandbox lands.
package transform

import "encoding/json"

// Input is a delivery as a transformation sees it.
type Input struct {
	EventType string
	Payload   json.RawMessage
	URL       string
	Headers   map[string]string
}

// Output is what a transformation returns.
type Output struct {
	Payload json.RawMessage
	URL     string
	Headers map[string]string
	Cancel  bool
}

// Error is a transformation that failed.
type Error struct {
	Line, Column int
	Message      string
}

func (e *Error) Error() string { return e.Message }
