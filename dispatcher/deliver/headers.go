package deliver

import (
	"fmt"

	"github.com/webhookd/webhookd/internal/store"
)

// Headers opens the extra request Headers of a leased delivery's
// subscription (nil when it has none). They come with the lease's row, so
// they cost no query; the sealer that opens the signing secrets opens
// them. Their values are never logged.
func (c *SecretCache) Headers(l store.LeasedDelivery) (map[string]string, error) {
	if l.SealedHeaders == nil {
		return nil, nil
	}
	h, err := c.sealer.OpenHeaders(l.SealedHeaders)
	if err != nil {
		return nil, fmt.Errorf("headers of subscription %s: %w", l.SubscriptionID, err)
	}
	return h, nil
}
