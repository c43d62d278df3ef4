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

// The hooks a notifier of the chain may listen to.
type (
	deliveryFailer interface {
		DeliveryFailed(context.Context, store.Delivery)
	}
	goneNotifier interface {
		EndpointGone(context.Context, store.Delivery)
	}
	tokenNotifier interface {
		TokenFailed(context.Context, store.Delivery, string)
	}
	disableNotifier interface {
		SubscriptionDisabled(context.Context, store.AutoDisabled, time.Duration)
	}
	expiryNotifier interface {
		CertificateExpiring(context.Context, store.ExpiringCertificate, time.Time)
	}
)

// each tells every notifier of c that listens to hook N.
func each[N any](c Chain, tell func(N)) {
	for _, n := range c {
		if x, ok := n.(N); ok {
			tell(x)
		}
	}
}

// DeliveryFailed tells each notifier that has the hook (deliver.Notifier).
func (c Chain) DeliveryFailed(ctx context.Context, d store.Delivery) {
	each(c, func(n deliveryFailer) { n.DeliveryFailed(ctx, d) })
}

// EndpointGone tells each notifier that has the hook (deliver.GoneNotifier).
func (c Chain) EndpointGone(ctx context.Context, d store.Delivery) {
	each(c, func(n goneNotifier) { n.EndpointGone(ctx, d) })
}

// TokenFailed tells each notifier that has the hook (deliver.TokenNotifier).
func (c Chain) TokenFailed(ctx context.Context, d store.Delivery, why string) {
	each(c, func(n tokenNotifier) { n.TokenFailed(ctx, d, why) })
}

// SubscriptionDisabled tells each notifier that has the hook
// (maintain.DisableNotifier).
func (c Chain) SubscriptionDisabled(ctx context.Context, d store.AutoDisabled, after time.Duration) {
	each(c, func(n disableNotifier) { n.SubscriptionDisabled(ctx, d, after) })
}

// CertificateExpiring tells each notifier that has the hook
// (maintain.ExpiryNotifier).
func (c Chain) CertificateExpiring(ctx context.Context, e store.ExpiringCertificate, now time.Time) {
	each(c, func(n expiryNotifier) { n.CertificateExpiring(ctx, e, now) })
}
