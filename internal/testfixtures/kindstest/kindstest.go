// Package kindstest gives tests the registry of every destination kind.
package kindstest

import (
	"testing"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/kinds"
)

// Registry is kinds.Default, sqs destinations without a key allowed
// under engineQueues; a wiring error fails tb.
func Registry(tb testing.TB, engineQueues []string) *destination.Registry {
	tb.Helper()
	r, err := kinds.Default(kinds.Options{SQSEngineQueues: engineQueues})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}
