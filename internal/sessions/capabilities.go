// Package sessions holds the rules of portal sessions: the capabilities a
// session may hold, how long it may last, its branding, and how its token
// is made and issued. It knows no HTTP: a broken rule is an
// *invalid.Error, which each surface renders in its own format.
package sessions

import (
	"fmt"
	"slices"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/merchants"
)

// The capabilities of a portal session. Every /v1 route requires one; an
// API key holds those its scopes grant (FromScopes).
const (
	// View reads everything (every GET route); every session holds it.
	View = "view"
	// ManageEndpoints creates, changes, deletes, enables and disables
	// subscriptions, rotates their secrets, sends test events and checks
	// endpoints.
	ManageEndpoints = "manage_endpoints"
	// ViewSecret reveals a subscription's signing secret.
	ViewSecret = "view_secret"
	// Resend redelivers and recovers deliveries.
	Resend = "resend"
)

// All is every capability in its canonical order, a fresh slice each call.
func All() []string { return []string{View, ManageEndpoints, ViewSecret, Resend} }

// Scope is the API key scope that grants capability c: webhooks:read
// grants view, webhooks:write every other one, so that each route keeps
// the scope it always required.
func Scope(c string) string {
	if c == View {
		return merchants.ScopeRead
	}
	return merchants.ScopeWrite
}

// FromScopes is the capabilities an API key's scopes grant, in canonical
// order.
func FromScopes(scopes []string) []string {
	var out []string
	for _, c := range All() {
		if slices.Contains(scopes, Scope(c)) {
			out = append(out, c)
		}
	}
	return out
}

// Check turns a requested capability list into the session's: nil means
// all of them; view is always added; duplicates collapse; the result is in
// canonical order. An unknown capability is refused naming param.
func Check(param string, requested []string) ([]string, error) {
	if requested == nil {
		return All(), nil
	}
	known := All()
	for _, c := range requested {
		if !slices.Contains(known, c) {
			return nil, invalid.Value(param, "capability_unknown", fmt.Sprintf("Unknown capability %q; known capabilities: %v.", invalid.Cut(c), known))
		}
	}
	var out []string
	for _, c := range known {
		if c == View || slices.Contains(requested, c) {
			out = append(out, c)
		}
	}
	return out, nil
}
