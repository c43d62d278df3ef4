package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
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
