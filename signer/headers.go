package signer

import (
	"encoding/json"
	"fmt"
)

// SealHeaders encrypts a subscription's extra request headers (they often
// carry credentials: an Authorization value, an API key) like a signing
// secret. An empty map seals to nil: nothing is stored.
func (s *Sealer) SealHeaders(h map[string]string) ([]byte, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("signer: seal headers: %w", err)
	}
	return s.Seal(string(b))
}

// OpenHeaders decrypts what SealHeaders produced; nil opens to nil.
func (s *Sealer) OpenHeaders(sealed []byte) (map[string]string, error) {
	if sealed == nil {
		return nil, nil
	}
	plain, err := s.Open(sealed)
	if err != nil {
		return nil, err
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(plain), &h); err != nil {
		return nil, fmt.Errorf("signer: open headers: %w", ErrSealed)
	}
	return h, nil
}
