package sessions

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
)

// DefaultTTL is how long a session lasts when the request names no
// ttl_seconds; MaxTTL is the longest one may ask for.
const (
	DefaultTTL = time.Hour
	MaxTTL     = 7 * 24 * time.Hour
)

// Request is a session as the core API or a merchant asks for it, before
// any rule is checked: nil fields take their defaults.
type Request struct {
	// Capabilities nil is all of them that the minter may grant.
	Capabilities []string
	// TTLSeconds nil is DefaultTTL.
	TTLSeconds *int64
	// Branding overrides the merchant's settings for this session.
	Branding merchants.Branding
	// APIKeyID is the key minting the session (POST /v1/portal_sessions),
	// which the session ends with; uuid.Nil when the core API mints it.
	APIKeyID uuid.UUID
	// KeyScopes are the scopes of that key: the session holds at most
	// what they grant (FromScopes). Unused when APIKeyID is uuid.Nil; with
	// a key and no scopes, the key grants nothing.
	KeyScopes []string
}

// Store is what an Issuer needs of the database.
type Store interface {
	// CreatePortalSession stores the session of an existing merchant;
	// an unknown merchant is store.ErrNotFound.
	CreatePortalSession(ctx context.Context, n store.NewPortalSession) (store.PortalSession, error)
}

// Issuer issues the portal sessions of one environment.
type Issuer struct {
	store       Store
	environment string
	httpLogos   bool
}

// NewIssuer is an Issuer storing sessions of environment in st; httpLogos
// allows a plain-HTTP logo URL (development, as plain-HTTP targets).
func NewIssuer(st Store, environment string, httpLogos bool) *Issuer {
	return &Issuer{store: st, environment: environment, httpLogos: httpLogos}
}

// Prepared is a request whose every rule holds, ready to be minted.
type Prepared struct {
	n store.NewPortalSession
}

// Issue checks the request (Prepare) and mints it (Mint): the token (the
// only time it is ever seen) with the stored session.
func (i *Issuer) Issue(ctx context.Context, merchantID string, r Request) (string, store.PortalSession, error) {
	p, err := i.Prepare(merchantID, r)
	if err != nil {
		return "", store.PortalSession{}, err
	}
	return i.Mint(ctx, p)
}

// Prepare checks the request in the order its fields are documented,
// touching nothing: a surface that bounds how many sessions are minted
// spends that budget between Prepare and Mint, so that a request refused
// for its body spends none.
func (i *Issuer) Prepare(merchantID string, r Request) (Prepared, error) {
	if err := merchants.CheckID("merchant_id", merchantID); err != nil {
		return Prepared{}, err
	}
	grantable := All()
	if r.APIKeyID != uuid.Nil {
		grantable = FromScopes(r.KeyScopes)
	}
	caps, err := Check("capabilities", r.Capabilities, grantable)
	if err != nil {
		return Prepared{}, err
	}
	ttl := DefaultTTL
	if r.TTLSeconds != nil {
		if *r.TTLSeconds < 1 || *r.TTLSeconds > int64(MaxTTL/time.Second) {
			return Prepared{}, invalid.Value("ttl_seconds", "ttl_out_of_range",
				fmt.Sprintf("ttl_seconds must be from 1 to %d (7 days).", int64(MaxTTL/time.Second)))
		}
		ttl = time.Duration(*r.TTLSeconds) * time.Second
	}
	if err := merchants.CheckBranding("branding.", r.Branding, i.httpLogos, false); err != nil {
		return Prepared{}, err
	}
	return Prepared{n: store.NewPortalSession{MerchantID: merchantID, Environment: i.environment, Capabilities: caps,
		AccentColor: r.Branding.AccentColor, LogoURL: r.Branding.LogoURL, TTL: ttl, APIKeyID: r.APIKeyID}}, nil
}

// Mint makes a token for a prepared session, stores its hash and returns
// the token with the stored session.
func (i *Issuer) Mint(ctx context.Context, p Prepared) (string, store.PortalSession, error) {
	token, err := NewToken()
	if err != nil {
		return "", store.PortalSession{}, err
	}
	n := p.n
	n.Token = token
	s, err := i.store.CreatePortalSession(ctx, n)
	if err != nil {
		return "", store.PortalSession{}, err
	}
	return token, s, nil
}
