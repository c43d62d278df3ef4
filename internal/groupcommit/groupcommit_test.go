package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
)

// TestRequestsWaitingTogetherShareOneWrite: requests queued while a write
// runs are written together in the next one, each caller gets its own
// result and error, and a whole-batch error reaches every caller of it.
func TestRequestsWaitingTogetherShareOneWrite(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	b := New(func(_ context.Context, reqs []int) ([]string, []error, error) {
		mu.Lock()
		sizes = append(sizes, len(reqs))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-release // the first write holds the writer while others queue
		}
		out, errs := make([]string, len(reqs)), make([]error, len(reqs))
		for i, r := range reqs {
			if r < 0 {
				errs[i] = fmt.Errorf("request %d refused", r)
			}
			out[i] = fmt.Sprint(r * 10)
		}
		return out, errs, nil
	})
	defer b.Close()

	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		if got, err := b.Do(context.Background(), 1); got != "10" || err != nil {
			t.Errorf("Do(1) = %q, %v", got, err)
		}
	}()
	// Wait until the first write runs, then queue a batch behind it.
	for {
		mu.Lock()
		n := len(sizes)
		mu.Unlock()
		if n == 1 {
			break
		}
		runtime.Gosched()
	}
	done := make(chan struct{})
	var out []string
	var errs []error
	go func() {
		defer close(done)
		out, errs = b.DoAll(context.Background(), []int{2, -3, 4})
	}()
	for len(b.queue) < 3 { // all three queued behind the held write
		runtime.Gosched()
	}
	close(release)
	<-firstDone
	<-done

	want := []struct {
		out    string
		failed bool
	}{{"20", false}, {"-30", true}, {"40", false}}
	for i, w := range want {
		if out[i] != w.out || (errs[i] != nil) != w.failed {
			t.Errorf("request %d: %q, %v; want %q, failed %v", i, out[i], errs[i], w.out, w.failed)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 2 || sizes[1] != 3 {
		t.Errorf("writes of %v requests, want [1 3]: the three queued together share one write", sizes)
	}
}

// TestABatchErrorReachesEveryCaller and a closed Batcher refuses new work.
func TestABatchErrorReachesEveryCaller(t *testing.T) {
	t.Parallel()
	boom := errors.New("database down")
	b := New(func(context.Context, []int) ([]int, []error, error) { return nil, nil, boom })
	if _, errs := b.DoAll(context.Background(), []int{1, 2}); !errors.Is(errs[0], boom) || !errors.Is(errs[1], boom) {
		t.Errorf("errors %v, want %v for each", errs, boom)
	}
	b.Close()
	if _, err := b.Do(context.Background(), 3); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close = %v, want ErrClosed", err)
	}
}

// TestLinger: a lingering Batcher waits for company only where the wait
// buys a larger batch. Each case sends its requests in steps; a step's
// requests are sent together, after the clock has moved by the step's
// advance, and the writes it must see (each a batch) once the step is
// sent. The Wait is an hour: a batch that waits when it should not never
// comes.
func TestLinger(t *testing.T) {
	t.Parallel()
	type step struct {
		advance time.Duration
		send    []int // negative: urgent
		writes  [][]int
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"the first request is written at once: nothing says another comes", []step{
			{0, []int{1}, [][]int{{1}}},
		}},
		{"requests that came close together wait until Below share a write", []step{
			{0, []int{1}, [][]int{{1}}},
			{time.Millisecond, []int{2}, nil},
			{time.Millisecond, []int{3, 4}, [][]int{{1}, {2, 3, 4}}},
		}},
		{"a request long after the last one is written at once", []step{
			{0, []int{1}, [][]int{{1}}},
			{2 * time.Hour, []int{2}, [][]int{{1}, {2}}},
		}},
		{"an urgent request does not wait", []step{
			{0, []int{1}, [][]int{{1}}},
			{time.Millisecond, []int{-2}, [][]int{{1}, {-2}}},
		}},
		{"an urgent request ends the wait of the batch before it", []step{
			{0, []int{1}, [][]int{{1}}},
			{time.Millisecond, []int{2}, nil},
			{time.Millisecond, []int{-3}, [][]int{{1}, {2, -3}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
			taken := 0 // the writer reads the clock once for each request it takes
			var writes [][]int
			b := NewLingering(func(_ context.Context, reqs []int) ([]int, []error, error) {
				mu.Lock()
				writes = append(writes, slices.Clone(reqs))
				mu.Unlock()
				return reqs, make([]error, len(reqs)), nil
			}, Linger[int]{
				Wait:   time.Hour,
				Below:  3,
				Urgent: func(r int) bool { return r < 0 },
				Clock: clock.Func(func() time.Time {
					mu.Lock()
					defer mu.Unlock()
					taken++
					return now
				}),
			})
			defer b.Close()
			sent := 0
			for i, s := range tc.steps {
				mu.Lock()
				now = now.Add(s.advance)
				mu.Unlock()
				go b.DoAll(context.Background(), s.send) // queued in their order
				// The next step's clock is not this one's: the writer takes
				// this step's requests first.
				sent += len(s.send)
				for countTaken(&mu, &taken) < sent {
					runtime.Gosched()
				}
				if s.writes == nil {
					continue
				}
				for deadline := time.Now().Add(10 * time.Second); countWrites(&mu, &writes) < len(s.writes); {
					if time.Now().After(deadline) {
						t.Fatalf("step %d: writes %v after 10 s, want %v", i, snapshot(&mu, &writes), s.writes)
					}
					runtime.Gosched()
				}
				if got := snapshot(&mu, &writes); !slices.EqualFunc(got, s.writes, slices.Equal) {
					t.Fatalf("step %d: writes %v, want %v", i, got, s.writes)
				}
			}
		})
	}
}

// TestCloseEndsALinger: a batch waiting for company is written when the
// Batcher closes.
func TestCloseEndsALinger(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	taken := 0
	b := NewLingering(func(_ context.Context, reqs []int) ([]int, []error, error) {
		return reqs, make([]error, len(reqs)), nil
	}, Linger[int]{Wait: time.Hour, Below: 8, Clock: clock.Func(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		taken++
		now = now.Add(time.Millisecond) // every request a millisecond after the last
		return now
	})})
	if _, err := b.Do(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := b.Do(context.Background(), 2); done <- err }() // waits for company
	for countTaken(&mu, &taken) < 2 {
		runtime.Gosched()
	}
	b.Close()
	if err := <-done; err != nil {
		t.Errorf("the lingering request: %v, want it written at Close", err)
	}
}

func countTaken(mu *sync.Mutex, taken *int) int {
	mu.Lock()
	defer mu.Unlock()
	return *taken
}

func countWrites(mu *sync.Mutex, writes *[][]int) int {
	mu.Lock()
	defer mu.Unlock()
	return len(*writes)
}

func snapshot(mu *sync.Mutex, writes *[][]int) [][]int {
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(*writes)
}
