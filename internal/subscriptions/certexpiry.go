package subscriptions

import "time"

// CertificateExpiryWarning is how long before an mtls client certificate's
// not_after the merchant is warned (an e-mail, expires_soon on read): two
// weeks, time enough to have a new certificate issued by a security team.
const CertificateExpiryWarning = 14 * 24 * time.Hour

// ExpiresSoon reports whether a certificate that expires at notAfter is
// within CertificateExpiryWarning of it at now (or expired).
func ExpiresSoon(notAfter, now time.Time) bool {
	return !now.Before(notAfter.Add(-CertificateExpiryWarning))
}
