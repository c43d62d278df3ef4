package store

import (
	"encoding/json"
	"fmt"
)

// Destination is a subscription's broker destination as stored: the whole
// of it sealed, and the summary that reads may show.
type Destination struct {
	// Sealed is the destination as JSON, sealed with the master key
	// (signer.Sealer): it holds the credentials.
	Sealed []byte
	// Summary is its public part: the type and the fields as the merchant
	// gave them, credentials masked (package subscriptions makes it).
	Summary map[string]any
}

// Type is the destination's type, as its summary names it.
func (d *Destination) Type() string {
	if d == nil {
		return ""
	}
	t, _ := d.Summary["type"].(string)
	return t
}

// destinationColumns are the two columns of a Destination as scanned: both
// NULL (a constraint keeps them so) for an HTTP endpoint.
type destinationColumns struct {
	sealed  []byte
	summary map[string]any
}

func (d destinationColumns) value() *Destination {
	if d.sealed == nil || d.summary == nil {
		return nil
	}
	return &Destination{Sealed: d.sealed, Summary: d.summary}
}

// destinationArgs are a Destination's two column values, nil for none; the
// summary goes as JSON text, as authenticationArgs explains.
func destinationArgs(d *Destination) (sealed []byte, summary *string, err error) {
	if d == nil {
		return nil, nil, nil
	}
	b, err := json.Marshal(d.Summary)
	if err != nil {
		return nil, nil, fmt.Errorf("destination summary: %w", err)
	}
	text := string(b)
	return d.Sealed, &text, nil
}
