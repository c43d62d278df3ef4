package oauthtoken

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// assertionType is RFC 7523 §2.2's client_assertion_type for a JWT.
const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// endpoint asks a token endpoint for a token, through the engine's client.
type endpoint struct {
	http *http.Client
	// assertionLifetime bounds how long a private_key_jwt assertion is
	// good for: long enough for the request, short enough that one seen
	// in transit is soon useless.
	assertionLifetime time.Duration
	// unknownLifetime is how long a token whose response gave no
	// expires_in is kept.
	unknownLifetime time.Duration
}

// fetched is a new token and how long the endpoint said it lives.
type fetched struct {
	accessToken string
	lifetime    time.Duration
}

// fetch makes one client credentials request at now. Every failure is an
// *Error.
func (e endpoint) fetch(ctx context.Context, c Credentials, now time.Time) (fetched, error) {
	conf := clientcredentials.Config{
		ClientID: c.ClientID, ClientSecret: c.ClientSecret, TokenURL: c.TokenURL, Scopes: c.Scopes,
		// client_secret_basic, the method RFC 6749 §2.3.1 says every
		// server supports; an explicit style also keeps the library from
		// probing a second style, a second request, after a failure.
		AuthStyle:      oauth2.AuthStyleInHeader,
		EndpointParams: url.Values{},
	}
	if c.Audience != "" {
		conf.EndpointParams.Set("audience", c.Audience)
	}
	if c.PrivateKey != "" {
		assertion, err := e.assertion(c, now)
		if err != nil {
			return fetched{}, &Error{said: "the client assertion could not be signed", err: err}
		}
		// private_key_jwt: client_id in the body beside the assertion,
		// no secret (RFC 7523 §2.2, OpenID Connect Core §9).
		conf.AuthStyle = oauth2.AuthStyleInParams
		conf.EndpointParams.Set("client_assertion_type", assertionType)
		conf.EndpointParams.Set("client_assertion", assertion)
	}
	tok, err := conf.Token(context.WithValue(ctx, oauth2.HTTPClient, e.http))
	if err != nil {
		return fetched{}, endpointError(err)
	}
	return fetched{accessToken: tok.AccessToken, lifetime: e.lifetime(tok)}, nil
}

// assertion is a fresh private_key_jwt assertion (RFC 7523 §3): webhookd's
// client id as issuer and subject, the token endpoint as audience, a
// single-use id and a short expiry.
func (e endpoint) assertion(c Credentials, now time.Time) (string, error) {
	key, method, err := c.signingKey()
	if err != nil {
		return "", err
	}
	claims := jwt.RegisteredClaims{
		Issuer:    c.ClientID,
		Subject:   c.ClientID,
		Audience:  jwt.ClaimStrings{c.TokenURL},
		ID:        rand.Text(),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(e.assertionLifetime)),
	}
	signed, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		return "", fmt.Errorf("sign client assertion: %w", err)
	}
	return signed, nil
}

// lifetime reads expires_in from the response as sent: the library turns
// it into an instant on the wall clock, and the cache judges freshness by
// the injected clock.
func (e endpoint) lifetime(tok *oauth2.Token) time.Duration {
	var seconds float64
	switch v := tok.Extra("expires_in").(type) {
	case float64:
		seconds = v
	case json.Number:
		seconds, _ = v.Float64()
	case string: // PayPal sends a string.
		seconds, _ = strconv.ParseFloat(v, 64)
	}
	if seconds <= 0 {
		return e.unknownLifetime
	}
	return time.Duration(seconds * float64(time.Second))
}

// endpointError keeps the status and RFC 6749 error code of a refusal and
// drops the body it came with, which the endpoint controls and which could
// echo what was sent (an error code in another shape is dropped too); an
// exchange that got no answer is told in the merchant's words, its cause
// kept for the log.
func endpointError(err error) *Error {
	var refused *oauth2.RetrieveError
	if errors.As(err, &refused) {
		e := &Error{}
		if rfc6749Code.MatchString(refused.ErrorCode) {
			e.Code = refused.ErrorCode
		}
		if refused.Response != nil {
			e.Status = refused.Response.StatusCode
		}
		return e
	}
	return unanswered(err, "no usable answer")
}
