package admin

import (
	"context"
	"log/slog"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// subscriptionDeleter deletes a merchant's subscription.
type subscriptionDeleter interface {
	// DeleteSubscription is store.ErrNotFound for a stranger's or a
	// missing subscription.
	DeleteSubscription(ctx context.Context, merchantID string, id uuid.UUID) error
}

// workDropper ends the waiting work of a subscription (the Publisher is
// one).
type workDropper interface {
	DropSubscription(ctx context.Context, merchantID string, subscriptionID uuid.UUID) error
}

// changeAnnouncer tells every process's publishes that a merchant's
// subscriptions or settings changed, so that none judges its events by
// what it kept of them (the Publisher is one).
type changeAnnouncer interface {
	SubscriptionsChanged(ctx context.Context, merchantID string)
}

// StatusAnnouncer tells a merchant's other subscriptions that one of its
// subscriptions was disabled or enabled (notify.Emitter is one), once
// per change of state.
type StatusAnnouncer interface {
	AnnounceStatus(ctx context.Context, merchantID string, id uuid.UUID, status store.SubscriptionStatus)
}

// subscriptionChanges is what both subscription surfaces, /v1 and the
// legacy routes, do to a merchant's subscriptions beyond their JSON: the
// registry's rules, dropping the waiting work of a subscription deleted or
// disabled, and masking headers. Written once here, so that a subscription
// changed on one surface is changed exactly as on the other.
type subscriptionChanges struct {
	// registry applies the rules of subscriptions and makes their
	// signing secrets.
	registry *subscriptions.Registry
	store    subscriptionDeleter
	// work is nil on a server without the delivery pipeline (tests of
	// the API alone).
	work   workDropper
	logger *slog.Logger
	// clock judges an mtls certificate's expires_soon on read.
	clock clock.Clock
	// announcer is nil on a server that announces nothing.
	announcer StatusAnnouncer
	// changed is nil on a server without the delivery pipeline.
	changed changeAnnouncer
}

// create makes the merchant's subscription and returns it with its
// secret, shown this once.
func (c subscriptionChanges) create(ctx context.Context, merchantID string, draft subscriptions.Draft) (store.Subscription, string, error) {
	sub, secret, err := c.registry.Create(ctx, merchantID, draft)
	if err != nil {
		return sub, secret, err
	}
	c.announceChange(ctx, merchantID)
	return sub, secret, nil
}

// announceChange tells the publishes of every process that merchantID's
// subscriptions changed, once the change is committed and before it is
// answered.
func (c subscriptionChanges) announceChange(ctx context.Context, merchantID string) {
	if c.changed != nil {
		c.changed.SubscriptionsChanged(ctx, merchantID)
	}
}

// update applies change and, when it leaves the subscription disabled,
// ends its waiting work: its parked attempts would otherwise come up one
// by one only to be abandoned. A status set is announced to the
// merchant's other subscriptions (operational events).
func (c subscriptionChanges) update(ctx context.Context, merchantID string, id uuid.UUID, change subscriptions.Change) (store.Subscription, error) {
	sub, err := c.registry.Update(ctx, merchantID, id, change)
	if err != nil {
		return sub, err
	}
	c.announceChange(ctx, merchantID)
	if sub.Status == store.SubscriptionDisabled {
		c.dropWork(ctx, merchantID, sub.ID)
	}
	if change.Status != nil && c.announcer != nil {
		// The announcer's claim tells a change from a status set again.
		c.announcer.AnnounceStatus(ctx, merchantID, sub.ID, sub.Status)
	}
	return sub, nil
}

// delete deletes the subscription and ends its waiting work.
func (c subscriptionChanges) delete(ctx context.Context, merchantID string, id uuid.UUID) error {
	if err := c.store.DeleteSubscription(ctx, merchantID, id); err != nil {
		return err
	}
	c.announceChange(ctx, merchantID)
	c.dropWork(ctx, merchantID, id)
	return nil
}

// dropWork is DropSubscription after a change the merchant made; a
// failure is only logged: each attempt then ends when it comes up.
func (c subscriptionChanges) dropWork(ctx context.Context, merchantID string, id uuid.UUID) {
	if c.work == nil {
		return
	}
	if err := c.work.DropSubscription(ctx, merchantID, id); err != nil {
		c.logger.WarnContext(ctx, "drop the waiting work of a deleted or disabled subscription", "subscription_id", id, "error", err)
	}
}

// maskedHeaders shows a subscription's header names with masked values,
// or nil when it has none. Headers that cannot be opened (a master key
// changed without re-sealing) are logged, without their values, and shown
// as none rather than failing the read of the rest of the subscription.
func (c subscriptionChanges) maskedHeaders(ctx context.Context, sub store.Subscription) map[string]string {
	h, err := c.registry.MaskedHeaders(sub)
	if err != nil {
		c.logger.ErrorContext(ctx, "open subscription headers", "subscription_id", sub.ID, "error", err)
		return nil
	}
	return h
}
