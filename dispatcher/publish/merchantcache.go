package publish

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
)

// SubscriptionsChangedChannel is the Redis channel a change of a
// merchant's subscriptions or settings is announced on, so that every
// process's publishes stop judging events by what it kept of them.
const SubscriptionsChangedChannel = "webhookd:subscriptions:changed"

// merchantCacheTTL bounds how long a kept merchant serves publishes when
// an announcement of a change is lost (Redis away between the change and
// the announcement, a pub/sub connection being made again). At 300 events
// of one merchant a second it still saves all but one read a second.
const merchantCacheTTL = time.Second

// merchantCacheSize bounds the kept (merchant, event type) pairs; past it
// the cache starts again empty, which costs one read per pair.
const merchantCacheSize = 10_000

// merchantCache keeps what a publish reads of a merchant for one event
// type (the merchant, and its subscriptions' filters for that type),
// between publishes. That read was a statement and a round trip of its
// own for every group of publishes, and at a light rate every group is one
// event.
//
// What the publish reads of the merchant beside the filters is its pinned
// api_version; the fan-out statement itself reads the subscriptions'
// status, deletion and events afresh in the publish's transaction, so a
// kept entry can be stale only in a filter, a filtered subscription that
// is new, or the api_version.
//
// Changes are made through any process's API, so the cache is emptied
// on every announcement on SubscriptionsChangedChannel (announceChange),
// which the process making a change publishes after its commit; an entry
// read before the announcement arrived but kept after is refused by the
// generation it was read under. The cache serves only while its
// subscription to the channel is confirmed, and each entry serves for
// merchantCacheTTL at most, which bounds the staleness when an
// announcement is lost. Emptied on any change, not the changed merchant's
// alone: changes are rare beside publishes, and the announcement needs no
// payload.
type merchantCache struct {
	clock clock.Clock
	// events and merchants read and make what is not kept; a merchant
	// made is pinned to defaultVersion.
	events         publisherEvents
	merchants      publisherMerchants
	defaultVersion string

	mu sync.Mutex
	// live: the subscription to the channel is confirmed (a change
	// announced from now on empties the cache).
	live bool
	// generation counts the emptyings: an entry read under an older one
	// is not kept.
	generation uint64
	entries    map[store.MerchantEventType]keptMerchant
}

// keptMerchant is one cache entry and when it stops serving.
type keptMerchant struct {
	filters store.MerchantFilters
	until   time.Time
}

// newMerchantCache is an empty cache over events and merchants, serving
// nothing until watch confirms its subscription.
func newMerchantCache(c clock.Clock, events publisherEvents, merchants publisherMerchants, defaultVersion string) *merchantCache {
	return &merchantCache{clock: c, events: events, merchants: merchants, defaultVersion: defaultVersion,
		entries: map[store.MerchantEventType]keptMerchant{}}
}

// watch empties the cache on each announcement that w receives, and has
// it serve once w is ready, until stop is closed; then it closes w.
func (c *merchantCache) watch(w *queue.Waiter, stop <-chan struct{}) {
	defer w.Close()
	select {
	case <-w.Ready():
	case <-stop:
		return
	}
	c.mu.Lock()
	c.live = true
	c.mu.Unlock()
	for {
		select {
		case <-w.Woken():
			c.empty()
		case <-stop:
			c.mu.Lock()
			c.live = false
			c.mu.Unlock()
			return
		}
	}
}

// empty forgets every entry, and refuses those being read.
func (c *merchantCache) empty() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	clear(c.entries)
}

// get returns the kept entries of keys, the keys to read, and the
// generation to keep what is read under (put).
func (c *merchantCache) get(keys []store.MerchantEventType) (found map[store.MerchantEventType]store.MerchantFilters, missing []store.MerchantEventType, generation uint64) {
	found = make(map[store.MerchantEventType]store.MerchantFilters, len(keys))
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return found, keys, c.generation
	}
	now := c.clock.Now()
	for _, k := range keys {
		if e, ok := c.entries[k]; ok && now.Before(e.until) {
			found[k] = e.filters
			continue
		}
		missing = append(missing, k)
	}
	return found, missing, c.generation
}

// put keeps read, read from the database under generation, unless the
// cache was emptied since.
func (c *merchantCache) put(generation uint64, read map[store.MerchantEventType]store.MerchantFilters) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || generation != c.generation {
		return
	}
	if len(c.entries)+len(read) > merchantCacheSize {
		clear(c.entries)
	}
	until := c.clock.Now().Add(merchantCacheTTL)
	for k, mf := range read {
		c.entries[k] = keptMerchant{filters: mf, until: until}
	}
}

// announceChange empties the cache of this process and announces the
// change to every other's. A failure to announce is returned for the
// caller to log: the others' entries then lapse within merchantCacheTTL.
func (c *merchantCache) announceChange(ctx context.Context, rdb redis.UniversalClient) error {
	c.empty()
	if err := rdb.Publish(ctx, SubscriptionsChangedChannel, "1").Err(); err != nil {
		return fmt.Errorf("announce a change of subscriptions: %w", err)
	}
	return nil
}

// read reads the merchants of a group's publishes (keys), each with
// the filters of its subscriptions an event of the publish's type must
// pass, in one statement. A merchant webhookd has not seen is created
// pinned to the default version (then it has no subscription); one that
// cannot be is in failed, so that its publishes fail alone. It reads
// first: an upsert on every publish would write (and lock) the merchant's
// row for nothing.
//
// What was read is kept for the next publishes (merchantCache), and a
// merchant kept is not read again while it serves.
func (c *merchantCache) read(ctx context.Context, keys []store.MerchantEventType) (found map[store.MerchantEventType]store.MerchantFilters, failed map[store.MerchantEventType]error, err error) {
	found, missing, generation := c.get(keys)
	failed = map[store.MerchantEventType]error{}
	if len(missing) == 0 {
		return found, failed, nil
	}
	read, err := c.events.MerchantsWithFilters(ctx, missing)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range missing {
		if _, ok := read[k]; ok {
			continue
		}
		m, err := c.merchants.EnsureMerchant(ctx, k.MerchantID, c.defaultVersion)
		if err != nil {
			failed[k] = err
			continue
		}
		read[k] = store.MerchantFilters{Merchant: m}
	}
	c.put(generation, read)
	for k, mf := range read {
		found[k] = mf
	}
	return found, failed, nil
}
