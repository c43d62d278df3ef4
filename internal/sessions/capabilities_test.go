package sessions_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/sessions"
)

func TestCheck(t *testing.T) {
	all := []string{"view", "manage_endpoints", "view_secret", "resend"}
	for _, tc := range []struct {
		name      string
		requested []string
		want      []string
		bad       bool
	}{
		{"absent: all", nil, all, false},
		{"empty: view alone", []string{}, []string{"view"}, false},
		{"view is added", []string{"resend"}, []string{"view", "resend"}, false},
		{"canonical order, no duplicate", []string{"resend", "view_secret", "resend", "view"}, []string{"view", "view_secret", "resend"}, false},
		{"unknown", []string{"view", "admin"}, nil, true},
		{"a scope is no capability", []string{merchants.ScopeWrite}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sessions.Check("capabilities", tc.requested, sessions.All())
			if tc.bad {
				if e := invalid.As(err); e == nil || e.Param != "capabilities" || e.Rule != "capability_unknown" {
					t.Fatalf("Check(%v) = %v, %v; want capability_unknown", tc.requested, got, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Check(%v) = %v, %v; want %v", tc.requested, got, err, tc.want)
			}
		})
	}
}

// TestCheckWithinTheKey: a session minted with an API key holds at most
// what the key's scopes grant. Asked for nothing in particular it gets
// every capability the key grants (view only when the key may read);
// asked for one the key does not grant it is refused, naming the
// capabilities beyond the key and the scopes they need. An unknown
// capability is refused first, whatever the key.
func TestCheckWithinTheKey(t *testing.T) {
	read, write := merchants.ScopeRead, merchants.ScopeWrite
	for _, tc := range []struct {
		name      string
		scopes    []string
		requested []string
		want      []string
		// beyond and needs are the refusal's capabilities and scopes;
		// nil when the session is minted.
		beyond, needs []string
	}{
		{"write key, defaults: no view", []string{write}, nil, []string{"manage_endpoints", "view_secret", "resend"}, nil, nil},
		{"write key, empty: view is not added", []string{write}, []string{}, []string{}, nil, nil},
		{"write key, resend", []string{write}, []string{"resend"}, []string{"resend"}, nil, nil},
		{"write key, view", []string{write}, []string{"view"}, nil, []string{"view"}, []string{read}},
		{"write key, view and resend", []string{write}, []string{"resend", "view"}, nil, []string{"view"}, []string{read}},
		{"read key, defaults", []string{read}, nil, []string{"view"}, nil, nil},
		{"read key, empty: view added", []string{read}, []string{}, []string{"view"}, nil, nil},
		{"read key, writes", []string{read}, []string{"resend", "view_secret"}, nil, []string{"view_secret", "resend"}, []string{write}},
		{"both scopes, defaults", []string{read, write}, nil, sessions.All(), nil, nil},
		{"both scopes, resend: view added", []string{write, read}, []string{"resend"}, []string{"view", "resend"}, nil, nil},
		{"no scope, defaults", nil, nil, []string{}, nil, nil},
		{"no scope, two", nil, []string{"manage_endpoints", "view"}, nil, []string{"view", "manage_endpoints"}, []string{read, write}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sessions.Check("capabilities", tc.requested, sessions.FromScopes(tc.scopes))
			if tc.beyond != nil {
				var e *sessions.BeyondKeyError
				if !errors.As(err, &e) || e.Param != "capabilities" || !slices.Equal(e.Capabilities, tc.beyond) || !slices.Equal(e.Scopes, tc.needs) {
					t.Fatalf("Check(%v) with scopes %v = %v, %v; want %v refused for lack of %v", tc.requested, tc.scopes, got, err, tc.beyond, tc.needs)
				}
				return
			}
			if err != nil || got == nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Check(%v) with scopes %v = %#v, %v; want %v", tc.requested, tc.scopes, got, err, tc.want)
			}
		})
	}
	// An unknown capability is the request's fault whatever the key.
	if _, err := sessions.Check("capabilities", []string{"view", "root"}, sessions.FromScopes([]string{write})); invalid.As(err) == nil || invalid.As(err).Rule != "capability_unknown" {
		t.Errorf("unknown capability beyond the key: %v, want capability_unknown", err)
	}
}

// TestWithin: on each request, a key's session holds the capabilities it
// was minted with that the key's scopes still grant.
func TestWithin(t *testing.T) {
	read, write := merchants.ScopeRead, merchants.ScopeWrite
	for _, tc := range []struct {
		caps, scopes, want []string
	}{
		{sessions.All(), []string{read, write}, sessions.All()},
		{sessions.All(), []string{write}, []string{"manage_endpoints", "view_secret", "resend"}},
		{sessions.All(), []string{read}, []string{"view"}},
		{[]string{"view", "resend"}, []string{read}, []string{"view"}},
		{[]string{"view"}, []string{write}, []string{}},
		{[]string{"view"}, nil, []string{}},
	} {
		if got := sessions.Within(tc.caps, tc.scopes); got == nil || !slices.Equal(got, tc.want) {
			t.Errorf("Within(%v, %v) = %#v, want %v", tc.caps, tc.scopes, got, tc.want)
		}
	}
}

func TestFromScopes(t *testing.T) {
	for _, tc := range []struct {
		scopes []string
		want   []string
	}{
		{[]string{merchants.ScopeRead}, []string{"view"}},
		{[]string{merchants.ScopeWrite}, []string{"manage_endpoints", "view_secret", "resend"}},
		{[]string{merchants.ScopeWrite, merchants.ScopeRead}, sessions.All()},
		{nil, nil},
	} {
		if got := sessions.FromScopes(tc.scopes); !slices.Equal(got, tc.want) {
			t.Errorf("FromScopes(%v) = %v, want %v", tc.scopes, got, tc.want)
		}
	}
	// Each capability's scope grants it back.
	for _, c := range sessions.All() {
		if !slices.Contains(sessions.FromScopes([]string{sessions.Scope(c)}), c) {
			t.Errorf("scope %s does not grant %s", sessions.Scope(c), c)
		}
	}
}

func TestNewToken(t *testing.T) {
	a, err := sessions.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, err := sessions.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || !sessions.IsToken(a) || len(a) != len(sessions.TokenPrefix)+43 {
		t.Errorf("tokens %q and %q: want two different whps_ tokens of 32 random bytes", a, b)
	}
	if sessions.IsToken("sandbox.abc") {
		t.Error("an API key is taken for a session token")
	}
}
