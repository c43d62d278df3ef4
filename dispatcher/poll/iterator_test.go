package poll

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/uuid"
)

var (
	testKey = bytes.Repeat([]byte{7}, 32)
	subA    = uuid.MustParse("0193a3b4-0000-7000-8000-00000000000a")
	subB    = uuid.MustParse("0193a3b4-0000-7000-8000-00000000000b")
)

// TestIteratorRoundTrip: an iterator names its position in its own
// subscription's line, and is refused for any other, under another key,
// or altered in any byte.
func TestIteratorRoundTrip(t *testing.T) {
	t.Parallel()
	it := NewIterators(testKey)
	for _, pos := range []int64{0, 1, 7, 1 << 40, math.MaxInt64} {
		s := it.Make(subA, pos)
		if got, err := it.Parse(subA, s); err != nil || got != pos {
			t.Fatalf("Parse(Make(%d)) = %d, %v", pos, got, err)
		}
	}
	good := it.Make(subA, 42)
	for _, tc := range []struct {
		name string
		with Iterators
		sub  uuid.UUID
		s    string
	}{
		{"another subscription", it, subB, good},
		{"another key", NewIterators(bytes.Repeat([]byte{8}, 32)), subA, good},
		{"no prefix", it, subA, strings.TrimPrefix(good, iteratorPrefix)},
		{"empty", it, subA, ""},
		{"padding", it, subA, good + "="},
		{"truncated", it, subA, good[:len(good)-1]},
		{"longer", it, subA, good + "AA"},
		{"not base64", it, subA, iteratorPrefix + "!!!!"},
		{"too long", it, subA, iteratorPrefix + strings.Repeat("A", 200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.with.Parse(tc.sub, tc.s); !errors.Is(err, ErrBadIterator) {
				t.Fatalf("Parse = %v, want ErrBadIterator", err)
			}
		})
	}
	for i := len(iteratorPrefix); i < len(good); i++ {
		b := []byte(good)
		b[i] = map[bool]byte{true: 'B', false: 'A'}[b[i] == 'A']
		if _, err := it.Parse(subA, string(b)); !errors.Is(err, ErrBadIterator) {
			t.Fatalf("iterator altered at byte %d accepted", i)
		}
	}
}

// FuzzIteratorParse: Parse never panics, accepts nothing but iterators it
// made for the subscription, and what it accepts names a position that
// makes the same iterator again.
func FuzzIteratorParse(f *testing.F) {
	it := NewIterators(testKey)
	f.Add(it.Make(subA, 0))
	f.Add(it.Make(subA, 123456))
	f.Add(it.Make(subB, 9))
	f.Add("iter_")
	f.Add("iter_AQ")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		pos, err := it.Parse(subA, s)
		if err != nil {
			if !errors.Is(err, ErrBadIterator) {
				t.Fatalf("Parse(%q) = %v, not ErrBadIterator", s, err)
			}
			return
		}
		if pos < 0 {
			t.Fatalf("Parse(%q) = negative position %d", s, pos)
		}
		if again := it.Make(subA, pos); again != s {
			t.Fatalf("Parse(%q) accepted a form Make does not produce (%q)", s, again)
		}
	})
}
