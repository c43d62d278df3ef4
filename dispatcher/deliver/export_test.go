package deliver

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
)

// RelaySender is the listener relay on rc and listeners, as the listener
// kind sends, for the conformance run of package deliver_test.
func RelaySender(rc redis.UniversalClient, listeners listenerStore, timeout time.Duration) (destination.Sender, error) {
	return newRelay(relayConfig{Redis: rc, Store: listeners, Timeout: timeout, Version: "test"}, clock.System{})
}
