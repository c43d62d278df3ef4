package dispatcher_test

import (
	"testing"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/poll"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestPollerNeedsTheMasterKey: without a master key there is no Poller
// (it signs the iterators); with one there is.
func TestPollerNeedsTheMasterKey(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	if d, _ := e.Dispatcher(); d.Poller != nil {
		t.Fatal("a Poller without a master key")
	}
	d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.MasterKey = make([]byte, 32) })
	var _ *poll.Poller = d.Poller
	if d.Poller == nil {
		t.Fatal("no Poller with a master key")
	}
}
