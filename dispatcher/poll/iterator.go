package poll

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"

	"github.com/google/uuid"
)

// An iterator is a position in one poll subscription's line, opaque to the
// merchant and signed so that it can be neither forged nor moved to
// another subscription: "iter_" then base64url (no padding) of a version
// byte, the subscription id (16 bytes), the position (8 bytes, big endian)
// and the first 16 bytes of an HMAC-SHA256 of the rest under a key derived
// from the master key. It carries no expiry: a line is read at the
// merchant's pace, and what the position names lives as long as the
// retention (30 days) keeps it.

// iteratorPrefix starts every iterator, so that one is told apart from a
// cursor or an id at a glance.
const iteratorPrefix = "iter_"

const (
	iteratorVersion = 1
	iteratorMACSize = 16
	// iteratorSize is the decoded length: version, id, position, MAC.
	iteratorSize = 1 + 16 + 8 + iteratorMACSize
	// maxIteratorLength bounds what is decoded at all.
	maxIteratorLength = 128
)

// ErrBadIterator is an iterator that is malformed, forged, or of another
// subscription.
var ErrBadIterator = errors.New("bad iterator")

// Iterators makes and checks the iterators of poll reads.
type Iterators struct {
	key []byte
}

// NewIterators derives the iterators' key from the master key, apart from
// every other use of it.
func NewIterators(masterKey []byte) Iterators {
	mac := hmac.New(sha256.New, masterKey)
	mac.Write([]byte("webhookd poll iterator v1"))
	return Iterators{key: mac.Sum(nil)}
}

// Make is the iterator of position in subscriptionID's line.
func (it Iterators) Make(subscriptionID uuid.UUID, position int64) string {
	raw := make([]byte, 0, iteratorSize)
	raw = append(raw, iteratorVersion)
	raw = append(raw, subscriptionID[:]...)
	raw = binary.BigEndian.AppendUint64(raw, uint64(position))
	raw = append(raw, it.mac(raw)...)
	return iteratorPrefix + base64.RawURLEncoding.EncodeToString(raw)
}

// Parse checks s and returns the position it names in subscriptionID's
// line; ErrBadIterator for anything else, whatever the reason, so that
// nothing about the key leaks.
func (it Iterators) Parse(subscriptionID uuid.UUID, s string) (int64, error) {
	body, ok := strings.CutPrefix(s, iteratorPrefix)
	if !ok || len(s) > maxIteratorLength {
		return 0, ErrBadIterator
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(body)
	if err != nil || len(raw) != iteratorSize || raw[0] != iteratorVersion {
		return 0, ErrBadIterator
	}
	signed, mac := raw[:iteratorSize-iteratorMACSize], raw[iteratorSize-iteratorMACSize:]
	if !hmac.Equal(mac, it.mac(signed)) {
		return 0, ErrBadIterator
	}
	if uuid.UUID(signed[1:17]) != subscriptionID {
		return 0, ErrBadIterator
	}
	position := int64(binary.BigEndian.Uint64(signed[17:]))
	if position < 0 {
		return 0, ErrBadIterator
	}
	return position, nil
}

func (it Iterators) mac(b []byte) []byte {
	m := hmac.New(sha256.New, it.key)
	m.Write(b)
	return m.Sum(nil)[:iteratorMACSize]
}
