package merchants_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

func TestCheckID(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		want     string // the rule broken; "" when the id is good
	}{
		{"plain", "m_123", ""},
		{"255 bytes", strings.Repeat("m", 255), ""},
		{"utf-8", "marchand_é", ""},
		{"empty", "", "missing"},
		{"256 bytes", strings.Repeat("m", 256), "merchant_id_malformed"},
		{"not utf-8", "m_\xff", "merchant_id_malformed"},
		{"a NUL", "m_\x00", "merchant_id_malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := merchants.CheckID("events[1].merchant_id", tc.id)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckID(%q) = %v, want nil", tc.id, err)
				}
				return
			}
			e := invalid.As(err)
			if e == nil || e.Param != "events[1].merchant_id" || e.Rule != tc.want || e.Missing != (tc.want == "missing") {
				t.Fatalf("CheckID(%q) = %#v, want %s naming the param given", tc.id, e, tc.want)
			}
		})
	}
}

func TestNewAPIKeyCarriesItsEnvironment(t *testing.T) {
	for _, tc := range []struct{ environment, prefix string }{
		{"production", "prod."}, {"sandbox", "sandbox."},
	} {
		a, err := merchants.NewAPIKey(tc.environment)
		if err != nil {
			t.Fatal(err)
		}
		b, err := merchants.NewAPIKey(tc.environment)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(a, tc.prefix) || merchants.KeyPrefix(tc.environment) != tc.prefix {
			t.Errorf("%s key %q, want prefix %q", tc.environment, a, tc.prefix)
		}
		if a == b || len(a) != len(tc.prefix)+43 { // 32 bytes, base64 without padding
			t.Errorf("%s keys %q and %q: want two different keys of 32 random bytes", tc.environment, a, b)
		}
	}
}

// wantRefused fails unless err is the broken rule want and the refusal left
// no trace: the merchant was not created.
func wantRefused(t *testing.T, st *store.Store, merchant string, err error, want invalid.Error) {
	t.Helper()
	if got := invalid.As(err); got == nil || *got != want {
		t.Fatalf("error %v, want %+v", err, want)
	}
	if _, err := st.Merchants.GetMerchant(context.Background(), merchant); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refusal created merchant %q: %v", merchant, err)
	}
}

func TestIssue(t *testing.T) {
	// One database for every case: each names a merchant of its own (the
	// refused ones are checked not to exist).
	st := storetest.NewStore(t)
	for _, tc := range []struct {
		name     string
		merchant string
		scopes   []string
		want     *invalid.Error // nil: issued
	}{
		{"read and write", "m_rw", []string{merchants.ScopeRead, merchants.ScopeWrite}, nil},
		{"read only", "m_r", []string{merchants.ScopeRead}, nil},
		{"no scopes", "m_none", nil,
			&invalid.Error{Param: "scopes", Rule: "missing", Message: "scopes is required.", Missing: true}},
		{"empty scopes", "m_none", []string{},
			&invalid.Error{Param: "scopes", Rule: "missing", Message: "scopes is required.", Missing: true}},
		{"unknown scope", "m_unknown", []string{merchants.ScopeRead, "admin"},
			&invalid.Error{Param: "scopes", Rule: "scope_unknown",
				Message: `Unknown scope "admin"; known scopes: [webhooks:read webhooks:write].`}},
		{"scopes are checked before the merchant", "", []string{"admin"},
			&invalid.Error{Param: "scopes", Rule: "scope_unknown",
				Message: `Unknown scope "admin"; known scopes: [webhooks:read webhooks:write].`}},
		{"bad merchant id", strings.Repeat("m", 256), []string{merchants.ScopeRead},
			&invalid.Error{Param: "merchant_id", Rule: "merchant_id_malformed", Message: "merchant_id must be 1 to 255 bytes of UTF-8."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			key, err := merchants.NewKeyIssuer(st.APIKeys, "production", "2026-01-01").Issue(ctx, tc.merchant, tc.scopes)
			if tc.want != nil {
				wantRefused(t, st, tc.merchant, err, *tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			stored, m, err := st.APIKeys.APIKeyByHash(ctx, store.HashAPIKey(key))
			if err != nil {
				t.Fatalf("the issued key is not stored: %v", err)
			}
			if !strings.HasPrefix(key, "prod.") || stored.Environment != "production" || stored.MerchantID != tc.merchant ||
				!slices.Equal(stored.Scopes, tc.scopes) {
				t.Errorf("key %q stored as %+v, want a production key of %s with %v", key, stored, tc.merchant, tc.scopes)
			}
			if m.ID != tc.merchant || m.APIVersion != "2026-01-01" {
				t.Errorf("merchant %+v, want %s pinned to the default version", m, tc.merchant)
			}
		})
	}
}

// versions is a catalogue of two versions, the older one sunset at sunset.
type versions struct{ sunset time.Time }

func (v versions) Usable(name string, now time.Time) bool {
	return name == "2026-06-01" || name == "2025-01-01" && now.Before(v.sunset)
}

func (versions) Latest() string { return "2026-06-01" }

func TestSettingsUpdate(t *testing.T) {
	now := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	ptr := func(s string) *string { return &s }
	// One database for every case: each names a merchant of its own.
	st := storetest.NewStore(t)
	for _, tc := range []struct {
		name      string
		merchant  string
		set       store.MerchantSettings
		wantEmail *string
		wantPin   string
		want      *invalid.Error // nil: stored
	}{
		{"new merchant, latest version", "m_new", store.MerchantSettings{}, nil, "2026-06-01", nil},
		{"e-mail and a usable version", "m_set", store.MerchantSettings{NotificationEmail: ptr("ops@example.com"),
			APIVersion: ptr("2026-06-01")}, ptr("ops@example.com"), "2026-06-01", nil},
		{"bad merchant id", strings.Repeat("m", 256), store.MerchantSettings{}, nil, "",
			&invalid.Error{Param: "merchant_id", Rule: "merchant_id_malformed", Message: "merchant_id must be 1 to 255 bytes of UTF-8."}},
		{"e-mail with a display name", "m_named", store.MerchantSettings{NotificationEmail: ptr("Ops <ops@example.com>")}, nil, "",
			&invalid.Error{Param: "notification_email", Rule: "email_not_plain", Message: "notification_email must be a plain e-mail address."}},
		{"sunset version", "m_sunset", store.MerchantSettings{APIVersion: ptr("2025-01-01")}, nil, "",
			&invalid.Error{Param: "api_version", Rule: "api_version_unusable", Message: `Unknown or sunset api_version "2025-01-01".`}},
		{"unknown version, long and cut", "m_unknown", store.MerchantSettings{APIVersion: ptr(strings.Repeat("v", 70))}, nil, "",
			&invalid.Error{Param: "api_version", Rule: "api_version_unusable",
				Message: `Unknown or sunset api_version "` + strings.Repeat("v", 64) + `…".`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			u := merchants.NewSettingsUpdater(st.Merchants, versions{sunset: now}, func() time.Time { return now })
			_, err := u.Update(ctx, tc.merchant, tc.set)
			if tc.want != nil {
				wantRefused(t, st, tc.merchant, err, *tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m, err := st.Merchants.GetMerchant(ctx, tc.merchant)
			if err != nil {
				t.Fatal(err)
			}
			if m.APIVersion != tc.wantPin || (m.NotificationEmail == nil) != (tc.wantEmail == nil) ||
				tc.wantEmail != nil && *m.NotificationEmail != *tc.wantEmail {
				t.Errorf("stored %+v, want version %s and e-mail %v", m, tc.wantPin, tc.wantEmail)
			}
		})
	}
}
