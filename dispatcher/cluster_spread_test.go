package dispatcher_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestScheduleSpreadsOverMasters: on a Redis Cluster of three masters, the
// schedule's work of merchants spread evenly over its shards is spread
// evenly over the masters: each serves within 25 % of the others' calls of
// the schedule's functions (INFO commandstats, FCALL: asynq's scripts are
// EVALSHA) while every attempt goes through the schedule, from an api-like
// publisher to a running worker.
func TestScheduleSpreadsOverMasters(t *testing.T) {
	storetest.FullLane(t, "a Redis Cluster's masters sharing the schedule")
	// On a cluster of its own, and what it counts is each master's calls,
	// not time: beside the package's other parallel tests.
	t.Parallel()
	const perShard, eventsEach = 2, 40
	e := dispatchertest.NewCluster(t)
	ctx := context.Background()
	lanes := queue.NewLanes(e.RC, 0)
	// perShard merchants in each shard: the test's merchants are as even
	// over the shards as many merchants are on average.
	var merchants []string
	inShard := make([]int, lanes.Shards())
	for i := 0; len(merchants) < perShard*lanes.Shards(); i++ {
		m := fmt.Sprintf("m_spread_%d", i)
		if k := lanes.ShardOf(m); inShard[k] < perShard {
			inShard[k]++
			merchants = append(merchants, m)
		}
	}
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	for _, m := range merchants {
		e.Subscribe(m, rcv.URL, "*")
	}
	// Published through a dispatcher that does not run, as an api process
	// does: every attempt is pushed to the schedule and taken from it.
	api, _ := e.Dispatcher()
	worker, _ := e.Dispatcher()
	masters := e.Cluster.Masters(ctx)
	before := scheduleCalls(t, masters)
	e.Run(worker)
	for range eventsEach {
		for _, m := range merchants {
			e.Publish(api, m, "payout.paid")
		}
	}
	want := eventsEach * len(merchants)
	e.WaitFor("every delivery to succeed", 60*time.Second, func() bool {
		var n int
		err := e.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE status = $1`, store.DeliverySucceeded).Scan(&n)
		return err == nil && n == want
	})
	after := scheduleCalls(t, masters)
	calls := make([]int64, len(masters))
	for i := range masters {
		calls[i] = after[i] - before[i]
	}
	least, most := slices.Min(calls), slices.Max(calls)
	t.Logf("REPORT schedule over %d masters: schedule calls per master %v for %d deliveries of %d merchants in %d shards (%.1f%% apart)",
		len(masters), calls, want, len(merchants), lanes.Shards(), 100*float64(most-least)/float64(max(least, 1)))
	if least == 0 || float64(most-least) > 0.25*float64(least) {
		t.Errorf("schedule calls per master %v: the busiest is more than 25%% above the least busy", calls)
	}
}

// scheduleCalls is each master's calls of the schedule's functions so far.
func scheduleCalls(t *testing.T, masters []*storetest.Node) []int64 {
	t.Helper()
	out := make([]int64, len(masters))
	for i, n := range masters {
		calls, err := n.CommandCalls(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out[i] = calls["fcall"]
	}
	return out
}
