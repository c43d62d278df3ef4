package sessions_test

import (
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
			got, err := sessions.Check("capabilities", tc.requested)
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
