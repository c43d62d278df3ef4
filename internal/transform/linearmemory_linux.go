package transform

import (
	"context"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// withLinearMemory makes the instances of calls under ctx keep their
// memory in a mapping of their own, outside the Go heap: reserved at its
// largest once, so growing it copies nothing, with only the pages the
// script touches resident, and all of it unmapped when the call ends.
// Without it wazero grows a Go slice, copying it each time, and the Go
// heap would hold up to twice the memory limit per call until a GC.
func withLinearMemory(ctx context.Context) context.Context {
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(newMappedMemory))
}

// mappedMemory is a WebAssembly memory in an anonymous private mapping.
type mappedMemory struct {
	buf []byte
}

func newMappedMemory(_, max uint64) experimental.LinearMemory {
	buf, err := unix.Mmap(-1, 0, int(max), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return &mappedMemory{}
	}
	return &mappedMemory{buf: buf}
}

// Reallocate implements experimental.LinearMemory: the mapping is already
// at its largest, so growing only lengthens the slice; nil (the module
// sees a failed memory.grow) past it or when the mapping failed.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > uint64(cap(m.buf)) {
		return nil
	}
	return m.buf[:size]
}

// Free implements experimental.LinearMemory.
func (m *mappedMemory) Free() {
	if m.buf != nil {
		_ = unix.Munmap(m.buf[:cap(m.buf)])
		m.buf = nil
	}
}
