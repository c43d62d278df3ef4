package queue

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// newTestHub is a hub on a Redis server of the test's own, and a client
// of that server to publish and look with.
func newTestHub(t *testing.T) (*WakeHub, *redis.Client) {
	t.Helper()
	hub, rc, _ := newTestHubOn(t)
	return hub, rc
}

// newTestHubOn is newTestHub with the server, to stop and start.
func newTestHubOn(t *testing.T) (*WakeHub, *redis.Client, *storetest.Redis) {
	t.Helper()
	rd := storetest.NewRedis(t)
	hubClient := redis.NewClient(&redis.Options{Network: "unix", Addr: rd.Socket})
	rc := redis.NewClient(&redis.Options{Network: "unix", Addr: rd.Socket})
	hub := NewWakeHub(hubClient, nil)
	t.Cleanup(func() {
		_ = hub.Close()
		_ = hubClient.Close()
		_ = rc.Close()
	})
	return hub, rc, rd
}

// readyWaiter waits on channel until Redis confirmed the subscription.
func readyWaiter(t *testing.T, hub *WakeHub, channel string) *Waiter {
	t.Helper()
	w, err := hub.Wait(channel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	select {
	case <-w.Ready():
	case <-time.After(5 * time.Second):
		t.Fatalf("subscription to %s never confirmed", channel)
	}
	return w
}

// woken waits for w's wake.
func woken(t *testing.T, w *Waiter, what string) {
	t.Helper()
	select {
	case <-w.Woken():
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: never woken", what)
	}
}

// pubsubClients counts the server's pub/sub connections.
func pubsubClients(t *testing.T, rc *redis.Client) int {
	t.Helper()
	list, err := rc.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, "sub=") && !strings.Contains(line, " sub=0 ") {
			n++
		}
	}
	return n
}

func publishOn(t *testing.T, rc *redis.Client, channel string) {
	t.Helper()
	if err := rc.Publish(t.Context(), channel, "1").Err(); err != nil {
		t.Fatal(err)
	}
}

func numSub(t *testing.T, rc *redis.Client, channel string) int64 {
	t.Helper()
	n, err := rc.PubSubNumSub(t.Context(), channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[channel]
}

func eventually(d time.Duration, ok func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	return ok()
}

// TestWakeHubOneConnectionEachWokenByItsOwnPublish: 100 waiters on
// distinct channels hold one pub/sub connection; a publish on a channel
// wakes its waiter and no other. A last publish on a sentinel channel,
// delivered after the others on the same connection, proves the others
// were not woken rather than waiting to see.
func TestWakeHubOneConnectionEachWokenByItsOwnPublish(t *testing.T) {
	t.Parallel()
	hub, rc := newTestHub(t)
	const n = 100
	waiters := make([]*Waiter, n)
	for i := range waiters {
		waiters[i] = readyWaiter(t, hub, fmt.Sprintf("webhookd:poll:{%d}", i))
	}
	sentinel := readyWaiter(t, hub, "webhookd:poll:{sentinel}")
	if got := pubsubClients(t, rc); got != 1 {
		t.Fatalf("%d waiters hold %d pub/sub connections, want 1", n+1, got)
	}
	for _, i := range []int{0, 17, 99} {
		publishOn(t, rc, fmt.Sprintf("webhookd:poll:{%d}", i))
		publishOn(t, rc, "webhookd:poll:{sentinel}")
		woken(t, sentinel, "sentinel")
		for j, w := range waiters {
			select {
			case <-w.Woken():
				if j != i {
					t.Fatalf("a publish on channel %d woke waiter %d", i, j)
				}
			default:
				if j == i {
					t.Fatalf("a publish on channel %d did not wake its waiter", i)
				}
			}
		}
	}
}

// TestWakeHubSubscribesWhileWaited: a channel is subscribed once for any
// number of its waiters, and unsubscribed when its last leaves; a waiter
// coming after that subscribes it again.
func TestWakeHubSubscribesWhileWaited(t *testing.T) {
	t.Parallel()
	hub, rc := newTestHub(t)
	const ch = "webhookd:poll:{a}"
	first := readyWaiter(t, hub, ch)
	second := readyWaiter(t, hub, ch)
	if got := numSub(t, rc, ch); got != 1 {
		t.Fatalf("two waiters: %d subscriptions of the channel, want 1", got)
	}
	publishOn(t, rc, ch)
	woken(t, first, "first waiter")
	woken(t, second, "second waiter")
	first.Close()
	if got := numSub(t, rc, ch); got != 1 {
		t.Fatalf("one waiter left: %d subscriptions, want 1", got)
	}
	second.Close()
	if !eventually(5*time.Second, func() bool { return numSub(t, rc, ch) == 0 }) {
		t.Fatal("the channel stayed subscribed after its last waiter left")
	}
	third := readyWaiter(t, hub, ch)
	publishOn(t, rc, ch)
	woken(t, third, "a waiter after the channel was unsubscribed")
}

// TestWakeHubResubscribesAfterADrop: the pub/sub connection killed, the
// hub connects again, subscribes every channel again and wakes its
// waiters (a publish meanwhile was lost); a publish after that wakes them
// as before.
func TestWakeHubResubscribesAfterADrop(t *testing.T) {
	t.Parallel()
	hub, rc := newTestHub(t)
	a := readyWaiter(t, hub, "webhookd:poll:{a}")
	b := readyWaiter(t, hub, "webhookd:poll:{b}")
	if err := rc.Do(t.Context(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	woken(t, a, "a, after the drop")
	woken(t, b, "b, after the drop")
	if numSub(t, rc, "webhookd:poll:{a}") != 1 || numSub(t, rc, "webhookd:poll:{b}") != 1 {
		t.Fatal("the channels were not subscribed again")
	}
	publishOn(t, rc, "webhookd:poll:{b}")
	woken(t, b, "b, by a publish after the drop")
}

// TestWakeHubClose: closing the hub wakes its waiters once and closes its
// connection; a Wait after is ErrWakeHubClosed.
func TestWakeHubClose(t *testing.T) {
	t.Parallel()
	hub, rc := newTestHub(t)
	w := readyWaiter(t, hub, "webhookd:poll:{a}")
	if err := hub.Close(); err != nil {
		t.Fatal(err)
	}
	woken(t, w, "a waiter at Close")
	if _, err := hub.Wait("webhookd:poll:{b}"); !errors.Is(err, ErrWakeHubClosed) {
		t.Fatalf("Wait after Close: %v, want ErrWakeHubClosed", err)
	}
	if !eventually(5*time.Second, func() bool { return pubsubClients(t, rc) == 0 }) {
		t.Fatal("the pub/sub connection outlived Close")
	}
}

// TestWakeHubRedisAway: with Redis away a Wait returns at once (no
// waiter waits for a write), and the waiters that came meanwhile are
// subscribed when it is back, and woken by a publish.
func TestWakeHubRedisAway(t *testing.T) {
	t.Parallel()
	hub, rc, rd := newTestHubOn(t)
	readyWaiter(t, hub, "webhookd:poll:{before}")
	rd.Stop()
	var during []*Waiter
	for i := range 20 {
		w, err := hub.Wait(fmt.Sprintf("webhookd:poll:{%d}", i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		during = append(during, w)
	}
	rd.Start()
	for i, w := range during {
		select {
		case <-w.Ready():
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d, come while Redis was away, never subscribed", i)
		}
		publishOn(t, rc, fmt.Sprintf("webhookd:poll:{%d}", i))
		woken(t, w, fmt.Sprintf("waiter %d", i))
	}
}

// TestWakeHubOnACluster: on a Redis Cluster the hub's one connection, on
// whichever node, hears publishes on channels of every slot (a classic
// PUBLISH reaches every node), as WakePollers sends them through a
// ClusterClient.
func TestWakeHubOnACluster(t *testing.T) {
	t.Parallel()
	cluster := storetest.NewCluster(t)
	var addrs []string
	for _, n := range cluster.Nodes {
		addrs = append(addrs, n.Addr)
	}
	hubClient := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	publisher := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	hub := NewWakeHub(hubClient, nil)
	t.Cleanup(func() {
		_ = hub.Close()
		_ = hubClient.Close()
		_ = publisher.Close()
	})
	ids := make([]uuid.UUID, 30) // spread over the three nodes' slots
	waiters := make([]*Waiter, len(ids))
	for i := range ids {
		ids[i] = uuid.New()
		waiters[i] = readyWaiter(t, hub, PollChannel(ids[i]))
	}
	if err := WakePollers(t.Context(), publisher, ids); err != nil {
		t.Fatal(err)
	}
	for i, w := range waiters {
		woken(t, w, fmt.Sprintf("waiter %d", i))
	}
	subscribers := 0
	for _, n := range cluster.Nodes {
		rc := n.Client()
		subscribers += pubsubClients(t, rc)
		_ = rc.Close()
	}
	if subscribers != 1 {
		t.Fatalf("%d pub/sub connections across the cluster, want 1", subscribers)
	}
}

// TestWakeHubChurn: waiters of one channel coming and going faster than
// Redis confirms leave the hub consistent: the last to come is subscribed
// and woken, and once it leaves the channel is unsubscribed.
func TestWakeHubChurn(t *testing.T) {
	t.Parallel()
	hub, rc := newTestHub(t)
	const ch = "webhookd:poll:{churn}"
	for range 500 {
		w, err := hub.Wait(ch)
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	last := readyWaiter(t, hub, ch)
	publishOn(t, rc, ch)
	woken(t, last, "the last waiter")
	last.Close()
	if !eventually(5*time.Second, func() bool { return numSub(t, rc, ch) == 0 }) {
		t.Fatal("the channel stayed subscribed after the churn")
	}
}
