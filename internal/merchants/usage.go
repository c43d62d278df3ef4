package merchants

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
)

// UsageFlushInterval is how often a KeyUsage writes what it saw: each key's
// last_used_at is written at most this often per process, whatever the
// traffic.
const UsageFlushInterval = time.Minute

// usageFinalFlush bounds the last write at shutdown.
const usageFinalFlush = 5 * time.Second

// UsageStore is what a KeyUsage needs of the database.
type UsageStore interface {
	// RecordAPIKeyUsage sets the last use of many keys in one statement,
	// never moving one back.
	RecordAPIKeyUsage(ctx context.Context, lastUsed map[uuid.UUID]time.Time) error
}

// KeyUsage keeps the last use of each API key in memory and writes them
// in one batch per interval, so that authenticating a request costs no
// write. It is safe for concurrent use; a nil *KeyUsage records nothing.
type KeyUsage struct {
	store  UsageStore
	now    func() time.Time
	logger *slog.Logger

	mu      sync.Mutex
	pending map[uuid.UUID]time.Time
}

// NewKeyUsage is a KeyUsage writing to st, with now as its clock.
func NewKeyUsage(st UsageStore, now func() time.Time, logger *slog.Logger) *KeyUsage {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &KeyUsage{store: st, now: now, logger: logger, pending: map[uuid.UUID]time.Time{}}
}

// Seen notes that the key authenticated a request now.
func (u *KeyUsage) Seen(keyID uuid.UUID) {
	if u == nil {
		return
	}
	now := u.now()
	u.mu.Lock()
	u.pending[keyID] = now
	u.mu.Unlock()
}

// Flush writes every use noted since the last flush in one statement. On
// error the uses are kept for the next flush (unless a later use of the
// same key was noted meanwhile).
func (u *KeyUsage) Flush(ctx context.Context) error {
	u.mu.Lock()
	batch := u.pending
	u.pending = map[uuid.UUID]time.Time{}
	u.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	err := u.store.RecordAPIKeyUsage(ctx, batch)
	if err != nil {
		u.mu.Lock()
		for id, at := range batch {
			if later, ok := u.pending[id]; !ok || later.Before(at) {
				u.pending[id] = at
			}
		}
		u.mu.Unlock()
	}
	return err
}

// Run flushes every interval until ctx is done, then once more, so that a
// process stopping loses no use it saw. A failed flush is logged and
// retried at the next one: usage is bookkeeping, never worth stopping the
// process for.
func (u *KeyUsage) Run(ctx context.Context, interval time.Duration) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), usageFinalFlush)
			defer cancel()
			if err := u.Flush(final); err != nil {
				u.logger.Warn("write the API keys' last use at shutdown", "error", err)
			}
			return nil
		case <-tick.C:
			if err := u.Flush(ctx); err != nil {
				u.logger.Warn("write the API keys' last use; retrying at the next flush", "error", err)
			}
		}
	}
}
