package receiver_test

import (
	"testing"

	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/receiver/receivertest"
)

func TestMemoryStatusStore(t *testing.T) {
	t.Parallel()
	receivertest.RunStatusStore(t, receiver.NewMemoryStatusStore())
}
