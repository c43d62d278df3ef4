package transform

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Limits, as docs/transformations.md states them.
const (
	DefaultTimePerCall    = 50 * time.Millisecond
	DefaultMemoryPerCall  = 16 << 20
	DefaultMaxCodeBytes   = 64 << 10
	DefaultMaxOutputBytes = 256 << 10
)

// pageBytes is the size of a WebAssembly memory page, the unit of the
// memory bound.
const pageBytes = 64 << 10

// Limits bound one call of a transformation: compiling it or running it.
// Every bound is enforced outside the script's reach (see
// docs/transformations.md, "Limits"); a call past one fails with an *Error.
type Limits struct {
	// TimePerCall is the CPU time a call may use, measured on the OS thread
	// the call is pinned to: the engine's start, the code's top level and
	// the handler. Default DefaultTimePerCall.
	TimePerCall time.Duration
	// WallPerCall bounds a call's wall-clock time too, so that a call whose
	// thread the machine starves of CPU still ends. Default twenty times
	// TimePerCall; at least TimePerCall.
	WallPerCall time.Duration
	// MemoryPerCall is the engine's whole memory in a call, in bytes: the
	// script's heap, its stack and the engine's own data. A multiple of
	// 64 KiB, at least 4 MiB. Default DefaultMemoryPerCall.
	MemoryPerCall int
	// MaxCodeBytes bounds the code. Default DefaultMaxCodeBytes.
	MaxCodeBytes int
	// MaxOutputBytes bounds the transformed payload as JSON; the lead's
	// wiring passes the payload limit (WEBHOOKD_MAX_PAYLOAD_BYTES).
	// Default DefaultMaxOutputBytes.
	MaxOutputBytes int
}

// minMemoryPerCall is the least memory the engine starts in: its data,
// its 1 MiB stack and a context's intrinsics take about 2 MiB.
const minMemoryPerCall = 4 << 20

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	if l.TimePerCall == 0 {
		l.TimePerCall = DefaultTimePerCall
	}
	if l.WallPerCall == 0 {
		l.WallPerCall = 20 * l.TimePerCall
	}
	if l.MemoryPerCall == 0 {
		l.MemoryPerCall = DefaultMemoryPerCall
	}
	if l.MaxCodeBytes == 0 {
		l.MaxCodeBytes = DefaultMaxCodeBytes
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = DefaultMaxOutputBytes
	}
	return l
}

// validate checks limits whose defaults are set.
func (l Limits) validate() error {
	var errs []error
	if l.TimePerCall < 0 {
		errs = append(errs, errors.New("TimePerCall must be positive"))
	}
	if l.WallPerCall < l.TimePerCall {
		errs = append(errs, fmt.Errorf("WallPerCall %v is less than TimePerCall %v", l.WallPerCall, l.TimePerCall))
	}
	if l.MemoryPerCall < minMemoryPerCall || l.MemoryPerCall%pageBytes != 0 || l.MemoryPerCall > 1<<30 {
		errs = append(errs, fmt.Errorf("MemoryPerCall %d must be a multiple of 64 KiB between 4 MiB and 1 GiB", l.MemoryPerCall))
	}
	if l.MaxCodeBytes < 0 || l.MaxOutputBytes < 0 {
		errs = append(errs, errors.New("MaxCodeBytes and MaxOutputBytes must be positive"))
	}
	return errors.Join(errs...)
}
