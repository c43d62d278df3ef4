package notify

import (
	"context"
	"time"

	"github.com/webhookd/webhookd/internal/store"
)

// Chain tells each of its notifiers, in turn, what the pipeline's hooks
// report, each that listens to that hook: the Mailer's e-mails and the
// Emitter's operational events hear of the same things. A nil entry is
// skipped.
type Chain []any

// DeliveryFailed tells each notifier that has the hook (deliver.Notifier).
func (c Chain) DeliveryFailed(ctx context.Context, d store.Delivery) {
	for _, n := range c {
		if x, ok := n.(interface {
			DeliveryFailed(context.Context, store.Delivery)
		}); ok {
			x.DeliveryFailed(ctx, d)
		}
	}
}

// EndpointGone tells each notifier that has the hook (deliver.GoneNotifier).
func (c Chain) EndpointGone(ctx context.Context, d store.Delivery) {
	for _, n := range c {
		if x, ok := n.(interface {
			EndpointGone(context.Context, store.Delivery)
		}); ok {
			x.EndpointGone(ctx, d)
		}
	}
}

// SubscriptionDisabled tells each notifier that has the hook
// (maintain.DisableNotifier).
func (c Chain) SubscriptionDisabled(ctx context.Context, d store.AutoDisabled, after time.Duration) {
	for _, n := range c {
		if x, ok := n.(interface {
			SubscriptionDisabled(context.Context, store.AutoDisabled, time.Duration)
		}); ok {
			x.SubscriptionDisabled(ctx, d, after)
		}
	}
}

// CertificateExpiring tells each notifier that has the hook
// (maintain.ExpiryNotifier).
func (c Chain) CertificateExpiring(ctx context.Context, e store.ExpiringCertificate, now time.Time) {
	for _, n := range c {
		if x, ok := n.(interface {
			CertificateExpiring(context.Context, store.ExpiringCertificate, time.Time)
		}); ok {
			x.CertificateExpiring(ctx, e, now)
		}
	}
}
