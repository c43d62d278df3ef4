package receiver

import (
	"context"
	"sync"
)

// MemoryStatusStore is a [StatusStore] in the process's memory, for one
// process and for tests. It grows with the number of resources; a
// long-running service keeps statuses in its own database next to the
// resources, behind the same two methods.
type MemoryStatusStore struct {
	mu       sync.Mutex
	statuses map[string]string
}

// NewMemoryStatusStore returns an empty MemoryStatusStore.
func NewMemoryStatusStore() *MemoryStatusStore {
	return &MemoryStatusStore{statuses: make(map[string]string)}
}

// LastStatus implements [StatusStore].
func (m *MemoryStatusStore) LastStatus(_ context.Context, key string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.statuses[key]
	return s, ok, nil
}

// SetStatus implements [StatusStore].
func (m *MemoryStatusStore) SetStatus(_ context.Context, key, status string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.statuses[key] = status
	return nil
}
