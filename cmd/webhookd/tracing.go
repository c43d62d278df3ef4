package main

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/webhookd/webhookd/internal/tracing"
)

// tracingFlushTimeout bounds the flush of the spans still buffered when
// the process stops.
const tracingFlushTimeout = 5 * time.Second

// startTracing starts the trace pipeline the OTEL_* variables configure
// (docs/tracing.md), or none without an endpoint.
func startTracing(ctx context.Context, logger *slog.Logger) (*tracing.Tracing, error) {
	t, err := tracing.New(ctx, version, logger)
	if err != nil {
		return nil, err
	}
	if endpoint := tracing.Endpoint(os.Getenv); endpoint != "" {
		// Without a password an endpoint URL may hold.
		if u, err := url.Parse(endpoint); err == nil {
			endpoint = u.Redacted()
		}
		logger.Info("tracing on", "endpoint", endpoint)
	}
	return t, nil
}

// stopTracing flushes the spans still buffered, the last thing a process
// does.
func stopTracing(t *tracing.Tracing, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		logger.Warn("flush traces", "error", err)
	}
}
