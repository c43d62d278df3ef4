package notify

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/wneessen/go-mail"

	"github.com/webhookd/webhookd/internal/store"
)

// CertificateExpiring e-mails the merchant that the client certificate
// its endpoint's deliveries present (mtls) expires soon, at now: once per
// certificate (the caller claimed it). Errors are logged.
func (n *Mailer) CertificateExpiring(ctx context.Context, c store.ExpiringCertificate, now time.Time) {
	log := n.logger.With("subscription_id", c.SubscriptionID, "merchant_id", c.MerchantID)
	if c.Email == nil || *c.Email == "" {
		log.InfoContext(ctx, "client certificate expires soon; the merchant has no notification address")
		return
	}
	if n.disabled {
		log.WarnContext(ctx, "client certificate expires soon; no SMTP server configured, e-mail not sent", "to", *c.Email)
		return
	}
	cert := c.Certificate
	var notAfter time.Time
	if cert.NotAfter != nil {
		notAfter = cert.NotAfter.UTC()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The client certificate that webhook deliveries to your endpoint %s present\n", c.URL)
	if now.Before(notAfter) {
		fmt.Fprintf(&b, "expires on %s, in %s.\n\n", notAfter.Format(time.RFC3339), daysWords(notAfter.Sub(now)))
	} else {
		fmt.Fprintf(&b, "expired on %s.\n\n", notAfter.Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "Subject:       %s\n", cert.Subject)
	fmt.Fprintf(&b, "Issuer:        %s\n", cert.Issuer)
	fmt.Fprintf(&b, "Serial:        %s\n", cert.Serial)
	fmt.Fprintf(&b, "Subscription:  %s\n\n", c.SubscriptionID)
	fmt.Fprintf(&b, "Once it has expired your endpoint will refuse the handshake and every delivery will fail.\n")
	fmt.Fprintf(&b, "Have a new certificate issued and set it with\n")
	fmt.Fprintf(&b, "POST /v1/webhook_subscriptions/%s {\"authentication\": {\"type\": \"mtls\", ...}}\n", c.SubscriptionID)
	fmt.Fprintf(&b, "or in the portal's endpoint page. This is the only e-mail about this certificate.\n")
	n.send(ctx, log, *c.Email, "Webhook client certificate expires soon: "+hostOf(c.URL), b.String(), "certificate expiry e-mail")
}

// send e-mails body to to, logging the outcome as what.
func (n *Mailer) send(ctx context.Context, log *slog.Logger, to, subject, body, what string) {
	m := mail.NewMsg()
	if err := m.From(n.from); err != nil {
		log.ErrorContext(ctx, "build "+what, "error", err)
		return
	}
	if err := m.To(to); err != nil {
		log.ErrorContext(ctx, "build "+what, "error", err)
		return
	}
	m.Subject(subject)
	m.SetBodyString(mail.TypeTextPlain, body)
	client, err := mail.NewClient(n.host, n.opts...)
	if err != nil {
		log.ErrorContext(ctx, what+" client", "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	if err := client.DialAndSendWithContext(ctx, m); err != nil {
		log.ErrorContext(ctx, "send "+what, "to", to, "error", err)
		return
	}
	log.InfoContext(ctx, what+" sent", "to", to)
}

// daysWords says how long is left in whole days, "1 day" or "13 days",
// or "less than a day".
func daysWords(d time.Duration) string {
	switch days := int(d / (24 * time.Hour)); days {
	case 0:
		return "less than a day"
	case 1:
		return "1 day"
	default:
		return fmt.Sprintf("%d days", days)
	}
}
