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
	// View reads everything (every GET route); every session holds it
	// unless the key that minted it may not read (webhooks:read).
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

// Check turns a requested capability list into the session's, within
// grantable, the capabilities its minter may grant (All for the core API,
// FromScopes of the key's scopes for an API key: a session never exceeds
// the key that minted it). Requested nil means every grantable one; view is
// added when grantable (a key that may not read mints sessions that may
// not either, rather than have the default widen it); duplicates collapse;
// the result is in canonical order and never nil (an empty list is shown
// as []). An unknown capability is refused naming param (*invalid.Error),
// whatever the minter; a known one beyond grantable is a *BeyondKeyError.
func Check(param string, requested, grantable []string) ([]string, error) {
	known := All()
	for _, c := range requested {
		if !slices.Contains(known, c) {
			return nil, invalid.Value(param, "capability_unknown", fmt.Sprintf("Unknown capability %q; known capabilities: %v.", invalid.Cut(c), known))
		}
	}
	out := []string{}
	var beyond []string
	for _, c := range known {
		asked, may := requested == nil || slices.Contains(requested, c), slices.Contains(grantable, c)
		switch {
		case may && (asked || c == View):
			out = append(out, c)
		case asked && requested != nil:
			beyond = append(beyond, c)
		}
	}
	if beyond != nil {
		return nil, beyondKey(param, beyond)
	}
	return out, nil
}

// Within is the capabilities of caps that scopes grant, in caps' order and
// never nil. A session minted with a key is judged by it on every request,
// so that a key whose scopes were narrowed after minting narrows its
// sessions at once, as revoking it ends them.
func Within(caps, scopes []string) []string {
	granted := FromScopes(scopes)
	out := []string{}
	for _, c := range caps {
		if slices.Contains(granted, c) {
			out = append(out, c)
		}
	}
	return out
}

// BeyondKeyError is a mint that asked for capabilities the minting key's
// scopes do not grant. It is no *invalid.Error: the same request is valid
// from a key holding more scopes, so each surface answers it as it answers
// a key lacking a scope (the API: 403 insufficient_scope naming Param and,
// in required_scopes, Scopes).
type BeyondKeyError struct {
	// Param is the field at fault ("capabilities").
	Param string
	// Capabilities are the ones refused, in canonical order.
	Capabilities []string
	// Scopes are the scopes they need, each once, in merchants.Scopes order.
	Scopes []string
}

// beyondKey is the BeyondKeyError of capabilities, naming the scopes that
// would grant them.
func beyondKey(param string, capabilities []string) *BeyondKeyError {
	var scopes []string
	for _, s := range merchants.Scopes() {
		if slices.ContainsFunc(capabilities, func(c string) bool { return Scope(c) == s }) {
			scopes = append(scopes, s)
		}
	}
	return &BeyondKeyError{Param: param, Capabilities: capabilities, Scopes: scopes}
}

// Error implements error, in words fit for the API's message.
func (e *BeyondKeyError) Error() string {
	return fmt.Sprintf("The API key minting the session lacks the scopes %v, which the capabilities %v need; a session never exceeds the key that mints it.",
		e.Scopes, e.Capabilities)
}
