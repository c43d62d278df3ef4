// Package maintain keeps the pipeline healthy over time, each job a
// periodic asynq task in a file of its own with its config and test:
//
//   - sweeper.go: the Sweeper parks again what Redis lost (overdue
//     deliveries with no parked, taken or leased attempt; manual attempts
//     asked for and not made; archived ingest tasks) and ends the
//     listeners whose connection is gone.
//   - maintainer.go: the Maintainer creates and drops day partitions and
//     expires idempotency keys.
//   - autodisabler.go: the AutoDisabler disables subscriptions whose every
//     attempt failed for days.
//   - certexpiry.go: CertExpiry e-mails merchants, once per certificate,
//     14 days before an mtls client certificate expires.
//   - replayer.go: the Replayer carries out bulk replays, a bounded page
//     of manual attempts at a time, resuming from its stored cursor.
package maintain

import (
	"log/slog"

	"github.com/webhookd/webhookd/internal/clock"
)

// Runtime is what every job of this package is given besides its own
// settings.
type Runtime struct {
	// Clock is the one clock; default the system clock.
	Clock clock.Clock
	// Logger receives the logs; default discards.
	Logger *slog.Logger
}

// clock is the Runtime's clock, or the system's.
func (r Runtime) clock() clock.Clock { return clock.Or(r.Clock) }

// logger is the Runtime's logger, or one that discards.
func (r Runtime) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}
