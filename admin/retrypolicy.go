package admin

import (
	"context"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// retryPolicyNamesOf are the names of a retry policy on the request's
// surface: retry_policy and timeout_seconds on /v1, retryPolicy and
// timeoutSeconds on the legacy routes.
func retryPolicyNamesOf(ctx context.Context) (param string, names subscriptions.RetryPolicyNames) {
	if isLegacy(ctx) {
		return "retryPolicy", subscriptions.RetryPolicyNames{Timeout: "timeoutSeconds"}
	}
	return "retry_policy", subscriptions.RetryPolicyNames{Timeout: "timeout_seconds"}
}

// retryPolicyInput reads the retry policy of a create or an update as
// sent (f): absent (set false), null (set, nil: the engine's) or the
// object the registry's rule reads.
func retryPolicyInput(ctx context.Context, f rawField) (set bool, p *store.RetryPolicy, err error) {
	if !f.Set {
		return false, nil, nil
	}
	param, names := retryPolicyNamesOf(ctx)
	p, err = subscriptions.ParseRetryPolicy(param, names, f.Raw)
	return true, p, err
}

// retryPolicyView is a subscription's retry policy as the request's
// surface shows it.
func retryPolicyView(ctx context.Context, sub store.Subscription) map[string]any {
	_, names := retryPolicyNamesOf(ctx)
	return subscriptions.RetryPolicyView(names, sub.RetryPolicy)
}
