package destination_test

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
)

// newPool is a pool of the echo kind whose "sealed" form is the plain
// JSON, on a clock the test moves.
func newPool(t *testing.T, max int, allowPlaintext bool) (*destination.Pool, *movedClock) {
	t.Helper()
	r, err := destination.NewRegistry(echoKind{})
	if err != nil {
		t.Fatal(err)
	}
	clk := &movedClock{now: time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)}
	var d net.Dialer
	p, err := destination.NewPool(destination.PoolConfig{Registry: r, Unseal: func(b []byte) ([]byte, error) { return b, nil },
		Env: destination.Env{Dial: d.DialContext, Timeout: time.Second, Clock: clock.Func(clk.Now)}, AllowPlaintext: allowPlaintext, Max: max})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, clk
}

// movedClock is a clock the test moves.
type movedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *movedClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *movedClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func publisher(t *testing.T, p *destination.Pool, id uuid.UUID, raw string) *echoPublisher {
	t.Helper()
	pub, err := p.Publisher(id, []byte(raw))
	if err != nil {
		t.Fatalf("publisher: %v", err)
	}
	return pub.(interface{ Unwrap() destination.Publisher }).Unwrap().(*echoPublisher)
}

func TestPoolKeepsOnePublisherPerDestinationVersion(t *testing.T) {
	p, _ := newPool(t, 0, false)
	sub := uuid.New()
	first := publisher(t, p, sub, `{"type": "echo", "host": "a.example.com:7"}`)
	if again := publisher(t, p, sub, `{"type": "echo", "host": "a.example.com:7"}`); again != first {
		t.Fatal("the same destination opened a second publisher")
	}
	changed := publisher(t, p, sub, `{"type": "echo", "host": "b.example.com:7"}`)
	if changed == first || !first.closed.Load() {
		t.Fatal("a changed destination kept its old publisher open")
	}
	p.Forget(sub)
	if !changed.closed.Load() || p.Len() != 0 {
		t.Fatal("Forget left the publisher open")
	}
}

func TestPoolClosesIdleAndLeastRecentlyUsed(t *testing.T) {
	p, clk := newPool(t, 2, false)
	a := publisher(t, p, uuid.New(), `{"type": "echo", "host": "a.example.com:7"}`)
	clk.Advance(time.Second)
	b := publisher(t, p, uuid.New(), `{"type": "echo", "host": "b.example.com:7"}`)
	clk.Advance(time.Second)
	publisher(t, p, uuid.New(), `{"type": "echo", "host": "c.example.com:7"}`)
	if !a.closed.Load() || b.closed.Load() || p.Len() != 2 {
		t.Fatalf("past the bound of 2: a closed %v, b closed %v, %d kept; want the least recently used (a) closed", a.closed.Load(), b.closed.Load(), p.Len())
	}
	clk.Advance(6 * time.Minute)
	publisher(t, p, uuid.New(), `{"type": "echo", "host": "d.example.com:7"}`)
	if !b.closed.Load() || p.Len() != 1 {
		t.Fatalf("after 6 idle minutes b closed %v, %d kept", b.closed.Load(), p.Len())
	}
}

func TestPoolRefusesAStoredDestinationBreakingARule(t *testing.T) {
	for _, tc := range []struct {
		name, stored, code string
		allowPlaintext     bool
	}{
		{"a field this build does not know", `{"type": "echo", "host": "a.example.com:7", "cacertfile": "/etc/passwd"}`, destination.CodeInvalid, true},
		{"a shape this build refuses", `{"type": "echo", "host": "no-port"}`, destination.CodeInvalid, true},
		{"a type this build does not deliver", `{"type": "smtp"}`, destination.CodeInvalid, true},
		{"in clear, plaintext not allowed", `{"type": "echo", "host": "plain.example.com:7"}`, destination.CodePlaintext, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newPool(t, 0, tc.allowPlaintext)
			_, err := p.Publisher(uuid.New(), []byte(tc.stored))
			var f *destination.Failure
			if !errors.As(err, &f) || f.Code != tc.code {
				t.Fatalf("publisher: %v, want a failure %s", err, tc.code)
			}
			if f.Said == "" || containsAny(f.Said, "/etc/passwd", "no-port") {
				t.Errorf("the merchant's words %q are empty or quote the stored value", f.Said)
			}
		})
	}
}

func containsAny(s string, parts ...string) bool {
	for _, p := range parts {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
