package merchants

import (
	"context"
	"net/mail"
	"time"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// VersionCatalogue is what a SettingsUpdater needs of the API versions.
type VersionCatalogue interface {
	// Usable tells whether a merchant may pin name at now (known, not sunset).
	Usable(name string, now time.Time) bool
	// Latest is the version a merchant is pinned to when it names none.
	Latest() string
}

// SettingsStore is what a SettingsUpdater needs of the database.
type SettingsStore interface {
	// UpdateMerchant creates or updates a merchant's settings.
	UpdateMerchant(ctx context.Context, id, defaultVersion string, set store.MerchantSettings) (store.Merchant, error)
}

// SettingsUpdater creates merchants and changes their settings under the
// rules of each setting.
type SettingsUpdater struct {
	store    SettingsStore
	versions VersionCatalogue
	now      func() time.Time
	// httpLogos allows a plain-HTTP portal logo URL (development).
	httpLogos bool
}

// SettingsOption adjusts a SettingsUpdater.
type SettingsOption func(*SettingsUpdater)

// WithHTTPLogos allows a portal logo on plain HTTP, as plain-HTTP targets
// are allowed in development.
func WithHTTPLogos(allow bool) SettingsOption {
	return func(u *SettingsUpdater) { u.httpLogos = allow }
}

// NewSettingsUpdater is a SettingsUpdater over st; now dates the check of a
// version against its sunset.
func NewSettingsUpdater(st SettingsStore, versions VersionCatalogue, now func() time.Time, opts ...SettingsOption) *SettingsUpdater {
	u := &SettingsUpdater{store: st, versions: versions, now: now}
	for _, o := range opts {
		o(u)
	}
	return u
}

// Update checks the merchant id and the settings present in set, then
// creates the merchant (pinned to the latest version unless set names one)
// or changes its settings. An empty notification e-mail, accent colour or
// logo URL clears it.
func (u *SettingsUpdater) Update(ctx context.Context, merchantID string, set store.MerchantSettings) (store.Merchant, error) {
	if err := CheckID("merchant_id", merchantID); err != nil {
		return store.Merchant{}, err
	}
	if set.NotificationEmail != nil && *set.NotificationEmail != "" {
		// A display name would be sent nowhere: only the address is kept.
		if a, err := mail.ParseAddress(*set.NotificationEmail); err != nil || a.Name != "" {
			return store.Merchant{}, invalid.Value("notification_email", "email_not_plain", "notification_email must be a plain e-mail address.")
		}
	}
	if set.APIVersion != nil && !u.versions.Usable(*set.APIVersion, u.now()) {
		return store.Merchant{}, invalid.Value("api_version", "api_version_unusable", "Unknown or sunset api_version "+invalid.Quote(*set.APIVersion)+".")
	}
	// An empty value clears the setting: the portal then shows its default.
	if err := CheckBranding("portal_", Branding{AccentColor: set.PortalAccentColor, LogoURL: set.PortalLogoURL}, u.httpLogos, true); err != nil {
		return store.Merchant{}, err
	}
	return u.store.UpdateMerchant(ctx, merchantID, u.versions.Latest(), set)
}
