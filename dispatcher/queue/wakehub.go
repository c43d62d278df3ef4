package queue

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscribeTimeout bounds one SUBSCRIBE or UNSUBSCRIBE written to the
// hub's connection (a dial included, when the connection is being made
// again): a Redis away holds no waiter longer, and the waiter then waits
// for the confirmation that the reconnection brings.
const subscribeTimeout = 2 * time.Second

// ErrWakeHubClosed is Wait's answer once the hub is closed: nothing will
// wake a waiter any more.
var ErrWakeHubClosed = errors.New("wake hub closed")

// WakeHub fans one Redis pub/sub connection out to every waiter of this
// process. A long poll of each subscription used to open a pub/sub
// connection of its own, so that a few merchants holding long polls could
// take every connection Redis accepts, and with them the schedule, the
// rate limits and every other merchant's polls; with the hub a process
// holds one, whatever the number of waiters (docs/decisions.md, "A
// merchant's input", rule 4).
//
// A channel is subscribed while it has waiters: a goroutine of the hub
// writes the SUBSCRIBEs and UNSUBSCRIBEs the comings and goings call for,
// so that no waiter waits for a write (a Redis away holds none), and a
// channel that came and went meanwhile costs nothing. A waiter is ready
// once Redis has confirmed the channel's subscription: a publish after
// that reaches it, so that a reader that waits for Ready before reading
// again misses no wake. When the connection drops, go-redis makes it
// again and subscribes every channel again; a publish made meanwhile is
// lost, so every waiter of a channel whose subscription is confirmed
// again is woken, to read again.
//
// The channels are classic ones (SUBSCRIBE, PUBLISH), not Redis Cluster's
// sharded ones: a classic PUBLISH reaches every node of a cluster, so the
// one connection, on whichever node, hears every channel. Sharded
// channels would need a connection per node that owns slots.
type WakeHub struct {
	rdb    redis.UniversalClient
	logger *slog.Logger

	mu sync.Mutex
	// ps is the shared connection, made when the first waiter comes
	// (in every process with a Publisher, which hears on it of changes
	// to subscriptions).
	ps *redis.PubSub
	// channels are the channels waited on, each with its waiters.
	channels map[string]*wakeChannel
	// subscribed are the channels whose SUBSCRIBE was written last (as
	// go-redis keeps them, to subscribe again after a drop); changed are
	// the channels whose waiters came or went since the writer last
	// looked; kick tells the writer there are some.
	subscribed map[string]bool
	changed    map[string]struct{}
	kick       chan struct{}
	// unconfirmed counts, by channel, the SUBSCRIBEs written whose
	// confirmation has not come. Redis answers one connection's commands
	// in order, so a channel whose count falls to zero has its last
	// SUBSCRIBE, written after any UNSUBSCRIBE of it, in force; a
	// confirmation that finds zero is one go-redis's resubscription
	// brought, after a drop.
	unconfirmed map[string]int
	closed      bool
	// stop ends the writer; stopped is closed once the reader and the
	// writer have returned.
	stop    chan struct{}
	stopped sync.WaitGroup
}

// wakeChannel is one channel waited on.
type wakeChannel struct {
	waiters map[*Waiter]struct{}
	// ready is closed once Redis has confirmed the subscription.
	ready     chan struct{}
	confirmed bool
}

// Waiter is one wait on a channel of a WakeHub; Close ends it.
type Waiter struct {
	hub     *WakeHub
	channel string
	ready   <-chan struct{}
	// woken holds at most one wake: a reader reads again once for any
	// number of publishes since it last read.
	woken chan struct{}
	once  sync.Once
}

// NewWakeHub is a hub on rdb's pub/sub. Close releases its connection.
func NewWakeHub(rdb redis.UniversalClient, logger *slog.Logger) *WakeHub {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &WakeHub{rdb: rdb, logger: logger, channels: map[string]*wakeChannel{}, subscribed: map[string]bool{},
		changed: map[string]struct{}{}, kick: make(chan struct{}, 1), unconfirmed: map[string]int{},
		stop: make(chan struct{})}
}

// Wait registers a waiter on channel; its Woken channel receives once for
// each publish on channel after Ready is closed (a publish before may
// wake it too). The caller closes it.
func (h *WakeHub) Wait(channel string) (*Waiter, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrWakeHubClosed
	}
	if h.ps == nil {
		h.ps = h.rdb.Subscribe(context.Background())
		h.stopped.Add(2)
		go h.read(h.ps.ChannelWithSubscriptions())
		go h.write()
	}
	w := &Waiter{hub: h, channel: channel, woken: make(chan struct{}, 1)}
	c, ok := h.channels[channel]
	if !ok {
		c = &wakeChannel{waiters: map[*Waiter]struct{}{}, ready: make(chan struct{})}
		h.channels[channel] = c
		if h.subscribed[channel] && h.unconfirmed[channel] == 0 {
			// Its last waiter has just left and the UNSUBSCRIBE is not
			// written: the subscription never stopped.
			c.confirmed = true
			close(c.ready)
		}
		h.change(channel)
	}
	c.waiters[w] = struct{}{}
	w.ready = c.ready
	return w, nil
}

// Ready is closed once a publish on the waiter's channel reaches it.
func (w *Waiter) Ready() <-chan struct{} { return w.ready }

// Woken receives when the channel was published on.
func (w *Waiter) Woken() <-chan struct{} { return w.woken }

// Close ends the wait; the channel is unsubscribed when it was its last.
func (w *Waiter) Close() { w.once.Do(func() { w.hub.leave(w) }) }

func (h *WakeHub) leave(w *Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.channels[w.channel]
	if !ok {
		return
	}
	delete(c.waiters, w)
	if len(c.waiters) == 0 {
		delete(h.channels, w.channel)
		h.change(w.channel)
	}
}

// change notes that channel's waiters came or went, for the writer.
func (h *WakeHub) change(channel string) {
	h.changed[channel] = struct{}{}
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// write writes the SUBSCRIBEs and UNSUBSCRIBEs that the waiters' comings
// and goings call for, one goroutine, so that they reach Redis in the
// order the counts assume. go-redis keeps a channel among those it
// subscribes again after a drop even when the write fails, and forgets an
// unsubscribed one all the same, so a failed write is made good by the
// reconnection.
func (h *WakeHub) write() {
	defer h.stopped.Done()
	for {
		select {
		case <-h.stop:
			return
		case <-h.kick:
		}
		var subscribe, unsubscribe []string
		h.mu.Lock()
		for channel := range h.changed {
			_, waited := h.channels[channel]
			switch {
			case waited && !h.subscribed[channel]:
				subscribe = append(subscribe, channel)
				h.subscribed[channel] = true
				h.unconfirmed[channel]++
			case !waited && h.subscribed[channel] && h.unconfirmed[channel] == 0:
				// Only once its SUBSCRIBEs are confirmed: a confirmation
				// that came after the UNSUBSCRIBE was written would say
				// nothing of the subscription in force. confirmed
				// brings the channel back here.
				unsubscribe = append(unsubscribe, channel)
				delete(h.subscribed, channel)
			}
		}
		clear(h.changed)
		h.mu.Unlock()
		if h.send(subscribe, h.ps.Subscribe) != nil {
			// Not written: no confirmation of it comes, but the
			// reconnection's, which finds the count at zero.
			h.mu.Lock()
			for _, channel := range subscribe {
				if h.unconfirmed[channel]--; h.unconfirmed[channel] <= 0 {
					delete(h.unconfirmed, channel)
				}
			}
			h.mu.Unlock()
		}
		_ = h.send(unsubscribe, h.ps.Unsubscribe)
	}
}

// send writes one command for channels, if any.
func (h *WakeHub) send(channels []string, command func(context.Context, ...string) error) error {
	if len(channels) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	err := command(ctx, channels...)
	if err != nil {
		h.logger.Warn("wake hub: (un)subscribe; the reconnection makes it good", "channels", len(channels), "error", err)
	}
	return err
}

// read dispatches what the connection receives until it is closed.
func (h *WakeHub) read(msgs <-chan any) {
	defer h.stopped.Done()
	for msg := range msgs {
		h.mu.Lock()
		switch m := msg.(type) {
		case *redis.Message:
			if c, ok := h.channels[m.Channel]; ok {
				c.wake()
			}
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.confirmed(m.Channel)
			}
		}
		h.mu.Unlock()
	}
}

// confirmed notes Redis's confirmation of a subscription to channel.
func (h *WakeHub) confirmed(channel string) {
	resubscribed := h.unconfirmed[channel] == 0
	if !resubscribed {
		h.unconfirmed[channel]--
		if h.unconfirmed[channel] > 0 {
			return
		}
		delete(h.unconfirmed, channel)
	}
	c, ok := h.channels[channel]
	switch {
	case !ok:
		// Its waiters left while it was being subscribed: now it can be
		// unsubscribed.
		if h.subscribed[channel] {
			h.change(channel)
		}
	case !c.confirmed:
		c.confirmed = true
		close(c.ready)
	case resubscribed:
		// The connection dropped and was made again: what was published
		// meanwhile is lost, so every waiter reads again.
		c.wake()
	}
}

// wake tells each waiter of c, without waiting for any.
func (c *wakeChannel) wake() {
	for w := range c.waiters {
		select {
		case w.woken <- struct{}{}:
		default:
		}
	}
}

// Close closes the hub's connection. The waiters still there are woken
// once, to read a last time; a Wait after is ErrWakeHubClosed.
func (h *WakeHub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	for _, c := range h.channels {
		c.wake()
	}
	ps := h.ps
	h.mu.Unlock()
	if ps == nil {
		return nil
	}
	close(h.stop)
	err := ps.Close()
	h.stopped.Wait()
	return err
}
