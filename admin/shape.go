package admin

import (
	"context"
	"net/http"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// batchNamesOf are the names of a batch's fields on the request's surface:
// snake_case on /v1, camelCase on the legacy routes.
func batchNamesOf(ctx context.Context) subscriptions.BatchNames {
	if isLegacy(ctx) {
		return subscriptions.BatchNames{MaxSize: "maxSize", MaxWait: "maxWaitMs"}
	}
	return subscriptions.BatchNames{MaxSize: "max_size", MaxWait: "max_wait_ms"}
}

// batchInput reads the batch field of a create or an update as sent (f):
// absent (set false), null (set, nil: remove it) or the object the
// registry's rule reads.
func batchInput(ctx context.Context, f rawField) (set bool, b *store.Batch, err error) {
	if !f.Set {
		return false, nil, nil
	}
	b, err = subscriptions.ParseBatch("batch", batchNamesOf(ctx), f.Raw)
	return true, b, err
}

// transformationInput reads the transformation field of a create or an
// update as sent (f): absent (set false), null (set, nil: remove it) or
// the object the registry's rule reads.
func transformationInput(f rawField) (set bool, t *subscriptions.TransformationInput, err error) {
	if !f.Set {
		return false, nil, nil
	}
	t, err = subscriptions.ParseTransformation("transformation", f.Raw)
	return true, t, err
}

// batchView is a subscription's batch as the request's surface shows it.
func batchView(ctx context.Context, sub store.Subscription) map[string]int {
	return subscriptions.BatchView(batchNamesOf(ctx), sub.Batch)
}

// boolQuery reads a boolean query parameter: absent or empty is false,
// else it must be true or false.
func boolQuery(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v != "" && v != "true" && v != "false" {
		return false, errInvalid(name, name+" must be true or false.")
	}
	return v == "true", nil
}
