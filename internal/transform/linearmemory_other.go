//go:build !linux

package transform

import "context"

// withLinearMemory leaves wazero's own memory, a Go slice, on systems
// other than Linux (see linearmemory_linux.go).
func withLinearMemory(ctx context.Context) context.Context { return ctx }
