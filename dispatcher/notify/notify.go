// Package notify tells merchants by e-mail what they must act on: deliveries
// that failed for good and subscriptions the engine disabled.
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/wneessen/go-mail"

	"github.com/webhookd/webhookd/internal/store"
)

// NotifyInterval is the least time between two failure e-mails about one
// subscription: a receiver that is down fails many deliveries, and its
// owner needs to hear it once, not once per event.
const NotifyInterval = time.Hour

// sendTimeout bounds one SMTP exchange, so that a slow mail server cannot
// hold the worker that recorded the failure.
const sendTimeout = 15 * time.Second

// mailerStore is what the Mailer needs of the database.
type mailerStore interface {
	// ClaimFailureNotification claims the subscription's failure e-mail
	// for interval; store.ErrConflict when one went out within it.
	ClaimFailureNotification(ctx context.Context, subscriptionID uuid.UUID, interval time.Duration) (store.FailureNotice, error)
}

// Mailer e-mails a merchant's notification address when a real
// delivery fails for good, at most once per subscription per
// NotifyInterval. The once-per-interval claim is taken in Postgres, so it
// holds across every worker. Without an SMTP URL it only logs.
type Mailer struct {
	store    mailerStore
	logger   *slog.Logger
	from     string
	host     string
	opts     []mail.Option
	disabled bool
}

// NewMailer builds a notifier sending through smtpURL:
// smtp://[user:pass@]host[:port] (STARTTLS when the server offers it, port
// 25 by default) or smtps://[user:pass@]host[:port] (TLS from the first
// byte, port 465 by default). An empty smtpURL makes a notifier that only
// logs.
func NewMailer(smtpURL, from string, st mailerStore, logger *slog.Logger) (*Mailer, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n := &Mailer{store: st, logger: logger, from: from}
	if smtpURL == "" {
		n.disabled = true
		return n, nil
	}
	if from == "" {
		return nil, errors.New("notify: a sender address is required with an SMTP URL")
	}
	u, err := url.Parse(smtpURL)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("notify: SMTP URL must look like smtp://user:pass@host:port")
	}
	port := 25
	opts := []mail.Option{mail.WithTimeout(sendTimeout)}
	switch u.Scheme {
	case "smtp":
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	case "smtps":
		port = 465
		opts = append(opts, mail.WithSSL())
	default:
		return nil, fmt.Errorf("notify: SMTP URL scheme %q: want smtp or smtps", u.Scheme)
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("notify: SMTP port %q: %w", p, err)
		}
	}
	opts = append(opts, mail.WithPort(port))
	if u.User != nil {
		pass, _ := u.User.Password()
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(u.User.Username()), mail.WithPassword(pass))
	}
	n.host, n.opts = u.Hostname(), opts
	return n, nil
}

// DeliveryFailed sends the failure e-mail of d's subscription unless one
// went out less than NotifyInterval ago. Test deliveries never send one.
// Errors are logged: a mail server that is down must not disturb delivery.
func (n *Mailer) DeliveryFailed(ctx context.Context, d store.Delivery) {
	if d.Test {
		return
	}
	log := n.logger.With("delivery_id", d.ID, "event_id", d.EventID, "attempt", d.AttemptCount,
		"subscription_id", d.SubscriptionID, "merchant_id", d.MerchantID)
	notice, err := n.store.ClaimFailureNotification(ctx, d.SubscriptionID, NotifyInterval)
	if errors.Is(err, store.ErrConflict) {
		log.DebugContext(ctx, "no failure e-mail: one went out within the interval, or the merchant has no notification address")
		return
	}
	if err != nil {
		log.ErrorContext(ctx, "claim failure e-mail", "error", err)
		return
	}
	if notice.Email == nil || *notice.Email == "" {
		log.InfoContext(ctx, "delivery failed; the merchant has no notification address")
		return
	}
	if n.disabled {
		log.WarnContext(ctx, "delivery failed; no SMTP server configured, e-mail not sent", "to", *notice.Email)
		return
	}
	msg, err := n.message(*notice.Email, notice, d)
	if err != nil {
		log.ErrorContext(ctx, "build failure e-mail", "error", err)
		return
	}
	client, err := mail.NewClient(n.host, n.opts...)
	if err != nil {
		log.ErrorContext(ctx, "failure e-mail client", "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		log.ErrorContext(ctx, "send failure e-mail", "to", *notice.Email, "error", err)
		return
	}
	log.InfoContext(ctx, "failure e-mail sent", "to", *notice.Email)
}

// message is the failure e-mail: what failed, where to look, and that no
// other e-mail follows for an hour.
func (n *Mailer) message(to string, notice store.FailureNotice, d store.Delivery) (*mail.Msg, error) {
	m := mail.NewMsg()
	if err := m.From(n.from); err != nil {
		return nil, fmt.Errorf("from %q: %w", n.from, err)
	}
	if err := m.To(to); err != nil {
		return nil, fmt.Errorf("to %q: %w", to, err)
	}
	m.Subject("Webhook delivery failed: " + d.EventType + " to " + hostOf(notice.URL))
	var b strings.Builder
	fmt.Fprintf(&b, "A webhook could not be delivered to your endpoint %s.\n\n", notice.URL)
	fmt.Fprintf(&b, "Event:         %s (%s)\n", d.EventID, d.EventType)
	fmt.Fprintf(&b, "Delivery:      %s\n", d.ID)
	fmt.Fprintf(&b, "Subscription:  %s\n", d.SubscriptionID)
	fmt.Fprintf(&b, "Attempts made: %d\n\n", d.AttemptCount)
	fmt.Fprintf(&b, "Read the attempts with GET /v1/webhook_deliveries/%s and send the event again with\n", d.ID)
	fmt.Fprintf(&b, "POST /v1/webhook_deliveries/%s/redeliver once your endpoint is fixed.\n\n", d.ID)
	fmt.Fprintf(&b, "You get at most one such e-mail per endpoint per hour; other deliveries may have failed too:\n")
	fmt.Fprintf(&b, "GET /v1/webhook_deliveries?status=failed&subscription_id=%s lists them.\n", d.SubscriptionID)
	m.SetBodyString(mail.TypeTextPlain, b.String())
	return m, nil
}

// hostOf is the host of a URL, for a short subject line.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	if h, _, err := net.SplitHostPort(u.Host); err == nil {
		return h
	}
	return u.Host
}

// SubscriptionDisabled e-mails the merchant that the auto-disable job
// disabled d: every attempt failed for after. It is sent whatever the
// failure e-mails' interval: it says something new, once.
func (n *Mailer) SubscriptionDisabled(ctx context.Context, d store.AutoDisabled, after time.Duration) {
	log := n.logger.With("subscription_id", d.SubscriptionID, "merchant_id", d.MerchantID)
	if d.Email == nil || *d.Email == "" {
		log.InfoContext(ctx, "subscription disabled; the merchant has no notification address")
		return
	}
	if n.disabled {
		log.WarnContext(ctx, "subscription disabled; no SMTP server configured, e-mail not sent", "to", *d.Email)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Your webhook endpoint %s has been disabled: every delivery attempt to it\n", d.URL)
	fmt.Fprintf(&b, "has failed since %s (%s).\n\n", d.FailingSince.UTC().Format(time.RFC3339), durationWords(after))
	fmt.Fprintf(&b, "Subscription:  %s\n\n", d.SubscriptionID)
	fmt.Fprintf(&b, "No event is lost: while it is disabled, its events are kept as skipped deliveries\n")
	fmt.Fprintf(&b, "(GET /v1/webhook_deliveries?status=skipped&subscription_id=%s).\n", d.SubscriptionID)
	fmt.Fprintf(&b, "Once your endpoint is fixed, enable it again with\n")
	fmt.Fprintf(&b, "POST /v1/webhook_subscriptions/%s {\"status\": \"enabled\"}\n", d.SubscriptionID)
	fmt.Fprintf(&b, "and replay what it missed with POST /v1/webhook_subscriptions/%s/recover.\n", d.SubscriptionID)
	n.send(ctx, log, *d.Email, "Webhook endpoint disabled: "+hostOf(d.URL), b.String(), "disabled e-mail")
}

// durationWords says a duration the way an e-mail would: "5 days" rather
// than "120h0m0s".
func durationWords(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		if days := int(d / (24 * time.Hour)); days != 1 {
			return fmt.Sprintf("%d days", days)
		}
		return "1 day"
	}
	return d.String()
}
