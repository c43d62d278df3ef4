package subscriptions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/testfixtures/kindstest"
	"github.com/webhookd/webhookd/signer"
)

// masterKey seals the secrets of every test.
func masterKey() []byte { return bytes.Repeat([]byte{9}, signer.MasterKeySize) }

// catalogue is the event catalogue of every test.
func catalogue() []string { return []string{"payout.created", "payout.paid", "deposit.received"} }

// registry is a Registry on a fresh database (storetest gives each test its
// own) with merchant already known.
func registry(t *testing.T, rules subscriptions.Rules, merchant string) (*subscriptions.Registry, *store.Store) {
	t.Helper()
	st := storetest.NewStore(t)
	if _, err := st.Merchants.EnsureMerchant(context.Background(), merchant, "2026-01-01"); err != nil {
		t.Fatal(err)
	}
	if rules.Kinds == nil {
		rules.Kinds = kindstest.Registry(t, nil)
	}
	return subscriptions.NewRegistry(st.Subscriptions, st.Listeners, masterKey(), rules), st
}

// stored is a destination as sealed: its JSON's members.
func stored(t testing.TB, sealed []byte) map[string]any {
	t.Helper()
	sealer, err := signer.NewSealer(masterKey())
	if err != nil {
		t.Fatal(err)
	}
	plain, err := sealer.Open(sealed)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(plain), &fields); err != nil {
		t.Fatal(err)
	}
	return fields
}

func ptr[T any](v T) *T { return &v }

// count is how many subscriptions merchant has.
func count(t *testing.T, st *store.Store, merchant string) int {
	t.Helper()
	subs, err := st.Subscriptions.ListSubscriptions(context.Background(), merchant, store.SubscriptionFilter{}, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(subs)
}

// wantBroken fails unless err is the broken rule want (Param, Rule,
// Missing, and a Message that contains message).
func wantBroken(t *testing.T, err error, want invalid.Error) {
	t.Helper()
	got := invalid.As(err)
	if got == nil {
		t.Fatalf("error %v, want a broken rule %+v", err, want)
	}
	if got.Param != want.Param || got.Rule != want.Rule || got.Missing != want.Missing || !strings.Contains(got.Message, want.Message) {
		t.Fatalf("broken rule %+v, want %+v", *got, want)
	}
}

func TestCreateRefusesBrokenRules(t *testing.T) {
	t.Parallel()
	// One database for every case: a refused create stores nothing, which
	// each case checks, so the cases cannot see one another.
	_, st := registry(t, subscriptions.Rules{}, "m_rules")
	strict := subscriptions.Rules{EventTypes: catalogue()}
	lax := subscriptions.Rules{EventTypes: catalogue(), AllowHTTPTargets: true, AllowPrivateTargets: true}
	good := func(d subscriptions.Draft) subscriptions.Draft {
		if d.URL == nil {
			d.URL = ptr("https://example.com/hooks")
		}
		if d.Events == nil {
			d.Events = []string{"payout.paid"}
		}
		return d
	}
	tooMany := map[string]string{}
	for i := range 51 {
		tooMany[strings.Repeat("k", i+1)] = "v"
	}
	for _, tc := range []struct {
		name  string
		rules subscriptions.Rules
		draft subscriptions.Draft
		want  invalid.Error
	}{
		{"url absent", strict, subscriptions.Draft{Events: []string{"payout.paid"}},
			invalid.Error{Param: "url", Rule: "missing", Message: "url is required.", Missing: true}},
		{"url empty", strict, good(subscriptions.Draft{URL: ptr("")}),
			invalid.Error{Param: "url", Rule: "missing", Message: "url is required.", Missing: true}},
		{"url too long", strict, good(subscriptions.Draft{URL: ptr("https://example.com/" + strings.Repeat("a", 2048))}),
			invalid.Error{Param: "url", Rule: "url_too_long", Message: "at most 2048 characters"}},
		{"url with a space", strict, good(subscriptions.Draft{URL: ptr("https://example.com/a b")}),
			invalid.Error{Param: "url", Rule: "url_control_characters", Message: "spaces or control characters"}},
		{"url relative", strict, good(subscriptions.Draft{URL: ptr("/hooks")}),
			invalid.Error{Param: "url", Rule: "url_not_absolute", Message: "absolute URL"}},
		{"http refused", strict, good(subscriptions.Draft{URL: ptr("http://example.com/")}),
			invalid.Error{Param: "url", Rule: "url_not_https", Message: "url must use https."}},
		{"ftp refused even when http is allowed", lax, good(subscriptions.Draft{URL: ptr("ftp://example.com/")}),
			invalid.Error{Param: "url", Rule: "url_not_https", Message: "url must use https."}},
		{"credentials", strict, good(subscriptions.Draft{URL: ptr("https://u:p@example.com/")}),
			invalid.Error{Param: "url", Rule: "url_credentials", Message: "credentials"}},
		{"fragment", strict, good(subscriptions.Draft{URL: ptr("https://example.com/#x")}),
			invalid.Error{Param: "url", Rule: "url_fragment", Message: "fragment"}},
		{"no host", strict, good(subscriptions.Draft{URL: ptr("https:///hooks")}),
			invalid.Error{Param: "url", Rule: "url_no_host", Message: "must name a host"}},
		{"port out of range", strict, good(subscriptions.Draft{URL: ptr("https://example.com:70000/")}),
			invalid.Error{Param: "url", Rule: "url_port", Message: "invalid port"}},
		{"localhost", strict, good(subscriptions.Draft{URL: ptr("https://api.localhost/")}),
			invalid.Error{Param: "url", Rule: "url_private", Message: "url must not point at localhost"}},
		{"private literal", strict, good(subscriptions.Draft{URL: ptr("https://10.0.0.1/")}),
			invalid.Error{Param: "url", Rule: "url_private", Message: "private, loopback"}},
		{"numeric host", strict, good(subscriptions.Draft{URL: ptr("https://2130706433/")}),
			invalid.Error{Param: "url", Rule: "url_private", Message: "dotted IPv4"}},
		{"events absent", strict, subscriptions.Draft{URL: ptr("https://example.com/")},
			invalid.Error{Param: "events", Rule: "missing", Message: "events is required.", Missing: true}},
		{"events empty", strict, good(subscriptions.Draft{Events: []string{}}),
			invalid.Error{Param: "events", Rule: "events_empty", Message: "at least one event type"}},
		{"wildcard with a type", strict, good(subscriptions.Draft{Events: []string{"*", "payout.paid"}}),
			invalid.Error{Param: "events", Rule: "events_wildcard_mixed", Message: `["*"] alone`}},
		{"test event type", strict, good(subscriptions.Draft{Events: []string{"ping.test"}}),
			invalid.Error{Param: "events", Rule: "events_test_type", Message: "ping.test cannot be subscribed to"}},
		{"unknown type, long and cut", strict, good(subscriptions.Draft{Events: []string{strings.Repeat("x", 100)}}),
			invalid.Error{Param: "events", Rule: "event_type_unknown", Message: `Unknown event type "` + strings.Repeat("x", 64) + `…"; see`}},
		{"description too long", strict, good(subscriptions.Draft{Description: ptr(strings.Repeat("é", 501))}),
			invalid.Error{Param: "description", Rule: "description_too_long", Message: "at most 500 characters"}},
		{"metadata too many keys", strict, good(subscriptions.Draft{Metadata: tooMany}),
			invalid.Error{Param: "metadata", Rule: "metadata_too_many_keys", Message: "at most 50 keys"}},
		{"metadata empty key", strict, good(subscriptions.Draft{Metadata: map[string]string{"": "v"}}),
			invalid.Error{Param: "metadata", Rule: "metadata_key_empty", Message: "keys must not be empty"}},
		{"metadata key too long", strict, good(subscriptions.Draft{Metadata: map[string]string{strings.Repeat("k", 41): "v"}}),
			invalid.Error{Param: "metadata[" + strings.Repeat("k", 41) + "]", Rule: "metadata_key_too_long", Message: "at most 40 characters"}},
		{"metadata value too long", strict, good(subscriptions.Draft{Metadata: map[string]string{"a": "ok", "b": strings.Repeat("v", 501)}}),
			invalid.Error{Param: "metadata[b]", Rule: "metadata_value_too_long", Message: "at most 500 characters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := subscriptions.NewRegistry(st.Subscriptions, st.Listeners, masterKey(), tc.rules)
			_, secret, err := reg.Create(context.Background(), "m_rules", tc.draft)
			wantBroken(t, err, tc.want)
			if secret != "" {
				t.Errorf("a refused create returned a secret")
			}
			if n := count(t, st, "m_rules"); n != 0 {
				t.Errorf("a refused create stored %d subscriptions", n)
			}
		})
	}
}

func TestCreateStoresTheSubscriptionAndItsSealedSecret(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		rules      subscriptions.Rules
		draft      subscriptions.Draft
		wantEvents []string
	}{
		{"duplicates dropped, order kept", subscriptions.Rules{EventTypes: catalogue()},
			subscriptions.Draft{URL: ptr("https://example.com/hooks"), Events: []string{"payout.paid", "payout.created", "payout.paid"},
				Description: ptr("ledger"), Metadata: map[string]string{"team": "payments"}},
			[]string{"payout.paid", "payout.created"}},
		{"wildcard", subscriptions.Rules{EventTypes: catalogue()},
			subscriptions.Draft{URL: ptr("https://93.184.215.14:8443/hooks"), Events: []string{"*"}}, []string{"*"}},
		{"private http target when allowed", subscriptions.Rules{EventTypes: catalogue(), AllowHTTPTargets: true, AllowPrivateTargets: true},
			subscriptions.Draft{URL: ptr("http://127.0.0.1:9999/hooks"), Events: []string{"deposit.received"}}, []string{"deposit.received"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			reg, st := registry(t, tc.rules, "m_create")
			sub, secret, err := reg.Create(ctx, "m_create", tc.draft)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := st.Subscriptions.GetSubscription(ctx, "m_create", sub.ID)
			if err != nil {
				t.Fatal(err)
			}
			if stored.URL != *tc.draft.URL || !slices.Equal(stored.Events, tc.wantEvents) || stored.Status != store.SubscriptionEnabled {
				t.Errorf("stored %+v, want url %s, events %v, enabled", stored, *tc.draft.URL, tc.wantEvents)
			}
			if (stored.Description == nil) != (tc.draft.Description == nil) ||
				tc.draft.Description != nil && *stored.Description != *tc.draft.Description {
				t.Errorf("description %v, want %v", stored.Description, tc.draft.Description)
			}
			if stored.Metadata["team"] != tc.draft.Metadata["team"] {
				t.Errorf("metadata %v, want %v", stored.Metadata, tc.draft.Metadata)
			}
			if got := openSecrets(t, st, sub.ID); !slices.Equal(got, []string{secret}) {
				t.Errorf("stored secrets open to %v, want only the one returned", got)
			}
		})
	}
}

// openSecrets opens a subscription's stored secrets, newest first.
func openSecrets(t *testing.T, st *store.Store, id uuid.UUID) []string {
	t.Helper()
	sealer, err := signer.NewSealer(masterKey())
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := st.Subscriptions.SigningSecrets(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range sealed {
		secret, err := sealer.Open(s.Ciphertext)
		if err != nil {
			t.Fatalf("a stored secret does not open with the master key: %v", err)
		}
		out = append(out, secret)
	}
	return out
}

func TestCreateWithABadMasterKeyStoresNothing(t *testing.T) {
	t.Parallel()
	st := storetest.NewStore(t)
	ctx := context.Background()
	if _, err := st.Merchants.EnsureMerchant(ctx, "m_key", "2026-01-01"); err != nil {
		t.Fatal(err)
	}
	reg := subscriptions.NewRegistry(st.Subscriptions, st.Listeners, []byte("short"), subscriptions.Rules{EventTypes: catalogue()})
	_, _, err := reg.Create(ctx, "m_key", subscriptions.Draft{URL: ptr("https://example.com/"), Events: []string{"*"}})
	if err == nil || invalid.As(err) != nil {
		t.Fatalf("error %v, want a failure that is no broken rule of the merchant's", err)
	}
	if n := count(t, st, "m_key"); n != 0 {
		t.Errorf("stored %d subscriptions without a secret", n)
	}
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	rules := subscriptions.Rules{EventTypes: catalogue()}
	original := subscriptions.Draft{URL: ptr("https://example.com/old"), Events: []string{"payout.paid"},
		Description: ptr("old"), Metadata: map[string]string{"k": "v"}}
	for _, tc := range []struct {
		name   string
		change subscriptions.Change
		// want is the stored subscription's URL, events, description,
		// status and metadata["k"] after the update.
		want      [5]string
		wantWrong *invalid.Error
	}{
		{"nothing changes", subscriptions.Change{},
			[5]string{"https://example.com/old", "payout.paid", "old", "enabled", "v"}, nil},
		{"every field", subscriptions.Change{URL: ptr("https://example.com/new"), Events: []string{"*"},
			SetDescription: true, Description: ptr("new"), Status: ptr("disabled"), Metadata: map[string]string{"k": "w"}},
			[5]string{"https://example.com/new", "*", "new", "disabled", "w"}, nil},
		{"description cleared", subscriptions.Change{SetDescription: true},
			[5]string{"https://example.com/old", "payout.paid", "<nil>", "enabled", "v"}, nil},
		{"bad url", subscriptions.Change{URL: ptr("http://example.com/")}, [5]string{},
			&invalid.Error{Param: "url", Rule: "url_not_https", Message: "url must use https."}},
		{"empty url", subscriptions.Change{URL: ptr("")}, [5]string{},
			&invalid.Error{Param: "url", Rule: "missing", Message: "url is required.", Missing: true}},
		{"empty events", subscriptions.Change{Events: []string{}}, [5]string{},
			&invalid.Error{Param: "events", Rule: "events_empty", Message: "at least one"}},
		{"deleted is not a status to set", subscriptions.Change{Status: ptr("deleted")}, [5]string{},
			&invalid.Error{Param: "status", Rule: "status_unknown", Message: "status must be enabled or disabled."}},
		{"bad metadata", subscriptions.Change{Metadata: map[string]string{"": "v"}}, [5]string{},
			&invalid.Error{Param: "metadata", Rule: "metadata_key_empty", Message: "must not be empty"}},
		{"bad description", subscriptions.Change{SetDescription: true, Description: ptr(strings.Repeat("d", 501))}, [5]string{},
			&invalid.Error{Param: "description", Rule: "description_too_long", Message: "at most 500"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			reg, st := registry(t, rules, "m_update")
			sub, _, err := reg.Create(ctx, "m_update", original)
			if err != nil {
				t.Fatal(err)
			}
			_, err = reg.Update(ctx, "m_update", sub.ID, tc.change)
			if tc.wantWrong != nil {
				wantBroken(t, err, *tc.wantWrong)
			} else if err != nil {
				t.Fatal(err)
			}
			stored, err := st.Subscriptions.GetSubscription(ctx, "m_update", sub.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if tc.wantWrong != nil {
				want = [5]string{"https://example.com/old", "payout.paid", "old", "enabled", "v"} // untouched
			}
			description := "<nil>"
			if stored.Description != nil {
				description = *stored.Description
			}
			got := [5]string{stored.URL, strings.Join(stored.Events, ","), description, string(stored.Status), stored.Metadata["k"]}
			if got != want {
				t.Errorf("stored %q, want %q", got, want)
			}
		})
	}
}

func TestUpdateOfAnotherMerchantsSubscriptionIsNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, st := registry(t, subscriptions.Rules{EventTypes: catalogue()}, "m_owner")
	if _, err := st.Merchants.EnsureMerchant(ctx, "m_other", "2026-01-01"); err != nil {
		t.Fatal(err)
	}
	sub, _, err := reg.Create(ctx, "m_owner", subscriptions.Draft{URL: ptr("https://example.com/"), Events: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Update(ctx, "m_other", sub.ID, subscriptions.Change{Status: ptr("disabled")}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update by another merchant: %v, want store.ErrNotFound", err)
	}
	if _, _, err := reg.RotateSecret(ctx, "m_other", sub.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("rotation by another merchant: %v, want store.ErrNotFound", err)
	}
}

func TestRotateSecretKeepsThePreviousOneSigning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, st := registry(t, subscriptions.Rules{EventTypes: catalogue()}, "m_rotate")
	sub, first, err := reg.Create(ctx, "m_rotate", subscriptions.Draft{URL: ptr("https://example.com/"), Events: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	rotated, second, err := reg.RotateSecret(ctx, "m_rotate", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.ID != sub.ID || second == "" || second == first {
		t.Fatalf("rotation gave %s and secret %q after %q", rotated.ID, second, first)
	}
	if got := openSecrets(t, st, sub.ID); !slices.Equal(got, []string{second, first}) {
		t.Errorf("stored secrets open to %v, want the new one then the previous one", got)
	}
}

func TestCheckStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status string
		ok     bool
	}{
		{string(store.SubscriptionEnabled), true}, {string(store.SubscriptionDisabled), true}, {"", false}, {"deleted", false}, {"Enabled", false},
	} {
		err := subscriptions.CheckStatus("status", tc.status)
		if tc.ok {
			if err != nil {
				t.Errorf("CheckStatus(%q) = %v, want nil", tc.status, err)
			}
			continue
		}
		wantBroken(t, err, invalid.Error{Param: "status", Rule: "status_unknown", Message: "status must be enabled or disabled."})
	}
}

// TestSubscriptionCap: Create refuses a merchant's subscription beyond
// Rules.MaxSubscriptions (100 when zero), every stored one not deleted
// counted, with a broken rule naming url and saying the limit.
func TestSubscriptionCap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		rules     subscriptions.Rules
		wantLimit int
	}{
		{"default", subscriptions.Rules{}, subscriptions.DefaultMaxSubscriptions},
		{"configured", subscriptions.Rules{MaxSubscriptions: 2}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rules.EventTypes = catalogue()
			reg, st := registry(t, tc.rules, "m1")
			// Stored directly, as another surface would, without a limit.
			for range tc.wantLimit {
				if _, err := st.Subscriptions.CreateSubscription(context.Background(), store.NewSubscription{MerchantID: "m1",
					URL: "https://example.com/hook", Events: []string{"*"}}, []byte("sealed")); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err := reg.Create(context.Background(), "m1", subscriptions.Draft{URL: ptr("https://example.com/hook"), Events: []string{"*"}})
			wantBroken(t, err, invalid.Error{Param: "url", Rule: "subscriptions_limit", Message: fmt.Sprintf("at most %d ", tc.wantLimit)})
			if n := count(t, st, "m1"); n != tc.wantLimit {
				t.Fatalf("%d stored, want %d", n, tc.wantLimit)
			}
		})
	}
}
