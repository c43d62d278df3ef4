package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store"
)

// listenerPoll is how often a connection looks at its listener's list
// unwoken, for a delivery whose publish was lost while the process's
// pub/sub connection was being made again; it is also how long after the
// grace a connection's end is made (endAfterGrace).
const listenerPoll = time.Second

// answerTTL is how long an answer waits for its worker, which stops
// waiting at the delivery's deadline anyway.
const answerTTL = time.Minute

// listenerStore is what a listener's connection needs of the database.
type listenerStore interface {
	// ExtendListener keeps a live listener alive until expiresAt;
	// store.ErrNotFound once it has ended.
	ExtendListener(ctx context.Context, id uuid.UUID, expiresAt time.Time) error
	// EndListener ends the listener if its expiry has passed at now.
	EndListener(ctx context.Context, merchantID string, id uuid.UUID, now time.Time, reason string) (bool, error)
	// ListenerLive tells whether the listener may still be sent a
	// delivery: not ended, and its API key still works.
	ListenerLive(ctx context.Context, id uuid.UUID) (bool, error)
}

// listenerEndType is the type of the message an API process pushes to the
// head of a listener's deliveries list when the listener's API key ends
// (apiKeyHandlers.endGrants): whichever process holds the connection pops it next,
// before any delivery, and closes the connection. The list is the one that
// process already takes deliveries from, woken by the same publish, so the
// signal needs nothing more of Redis, and a process that is reconnecting
// to Redis finds it when it is back.
const listenerEndType = "end"

// errKeyEnded ends a connection whose listener ended with its API key.
var errKeyEnded = errors.New("the API key that opened the listener no longer works")

// pushListenerEnd tells the process holding each listener's connection to
// close it.
func pushListenerEnd(ctx context.Context, rdb redis.UniversalClient, listeners []uuid.UUID) error {
	msg, err := json.Marshal(map[string]string{"type": listenerEndType})
	if err != nil {
		return err
	}
	pipe := rdb.TxPipeline()
	for _, id := range listeners {
		key := listener.DeliveriesKey(id)
		pipe.LPush(ctx, key, msg)
		pipe.Publish(ctx, listener.DeliveriesChannel(id), "1")
		// Nobody may be there to take it (the command away within its
		// grace): the list goes on its own, as a worker's would.
		pipe.Expire(ctx, key, answerTTL)
	}
	_, err = pipe.Exec(ctx)
	return err
}

// listenerConn is one listener's WebSocket, on the API process that holds
// it. It sends the ready message, then runs three loops until the
// connection ends: heartbeats (a ping, and the listener's expiry pushed
// one grace ahead), deliveries (taken from the listener's Redis list, where
// workers push them, and written to the socket) and answers (read from the
// socket and pushed to the key the delivery's worker waits on). Once the
// connection is gone the listener lives one more grace, for the command to
// reconnect, and is then ended.
type listenerConn struct {
	conn  *websocket.Conn
	redis redis.UniversalClient
	// wakes is the process's shared pub/sub connection, on which the
	// connection waits for its listener's deliveries.
	wakes    *queue.WakeHub
	store    listenerStore
	listener store.Listener
	secret   string
	grace    time.Duration
	now      func() time.Time
	logger   *slog.Logger
	// place is the connection's place among its merchant's listen
	// connections (heldLimit), renewed at each heartbeat.
	place *heldPlace

	mu sync.Mutex
	// pending are the deliveries written to the socket and not yet
	// answered, by id, with their deadline: an answer is relayed only for
	// one of them, so that a command cannot write to any other key.
	pending map[string]time.Time
}

// run serves the connection until it ends or ctx is done.
func (c *listenerConn) run(ctx context.Context) {
	c.pending = map[string]time.Time{}
	defer c.endAfterGrace()
	ready, err := json.Marshal(listener.Ready{Type: listener.TypeReady, ListenerID: c.listener.ID, Secret: c.secret,
		Events: c.listener.Events, GraceSeconds: int(c.grace / time.Second)})
	if err != nil {
		c.conn.CloseNow()
		return
	}
	if err := c.conn.Write(ctx, websocket.MessageText, ready); err != nil {
		c.conn.CloseNow()
		return
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.closeFor(c.heartbeat(gctx)) })
	g.Go(func() error { return c.closeFor(c.relayDeliveries(gctx)) })
	g.Go(func() error { return c.readAnswers(gctx) })
	_ = g.Wait()
	c.conn.CloseNow()
}

// closeFor closes the connection with a frame that says why, when err
// ends the listener: from the goroutine that met it, before the group's
// context is cancelled, since a read cancelled midway drops the connection
// with no frame. The command sees the reason, reconnects and is told 401
// (a key ended) or gets a new listener.
func (c *listenerConn) closeFor(err error) error {
	switch {
	case errors.Is(err, errKeyEnded):
		_ = c.conn.Close(websocket.StatusPolicyViolation, "api key ended")
	case errors.Is(err, store.ErrNotFound):
		_ = c.conn.Close(websocket.StatusPolicyViolation, "listener ended")
	}
	return err
}

// endAfterGrace ends the listener once the grace has passed, unless a
// reconnect (here or on another API process) has pushed its expiry on.
// A process that stops first leaves it to the workers' sweeper.
func (c *listenerConn) endAfterGrace() {
	time.AfterFunc(c.grace+listenerPoll, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.store.EndListener(ctx, c.listener.MerchantID, c.listener.ID, c.now(), listener.ClosedError); err != nil {
			c.logger.WarnContext(ctx, "end listener; the sweeper will", "listener_id", c.listener.ID, "error", err)
		}
	})
}

// heartbeat pings the command and keeps the listener alive, three times a
// grace, so that one lost beat does not end it.
func (c *listenerConn) heartbeat(ctx context.Context) error {
	every := max(c.grace/3, 100*time.Millisecond)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		err := c.store.ExtendListener(ctx, c.listener.ID, c.now().Add(c.grace))
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("listener %s: %w", c.listener.ID, err)
		}
		if err != nil && ctx.Err() == nil {
			// Postgres away for a moment: the grace covers a missed beat.
			c.logger.WarnContext(ctx, "listener: heartbeat", "listener_id", c.listener.ID, "error", err)
		}
		if err := c.place.renew(ctx); err != nil && ctx.Err() == nil {
			// Its lease is two graces: a missed beat or two keeps it.
			c.logger.WarnContext(ctx, "listener: renew its place", "listener_id", c.listener.ID, "error", err)
		}
		c.forgetExpired()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err = c.conn.Ping(pctx)
		cancel()
		if err != nil {
			return fmt.Errorf("listener %s: ping: %w", c.listener.ID, err)
		}
	}
}

// relayDeliveries writes each delivery a worker relays to the socket,
// until the listener's API key ends. It holds no Redis connection while it
// waits: it waits on the listener's channel of the process's shared
// pub/sub connection (queue.WakeHub), on which the relay publishes with
// each push, and then takes what the list holds with LPOPs of a pooled
// connection, so that listeners cannot take the pool the rate limits and
// idempotency need (docs/decisions.md, "A merchant's input", rule 4). It
// looks at the list once at the start, before the subscription is
// confirmed (for what was pushed while the command reconnected), once
// the subscription is confirmed (for what was pushed meanwhile, which no
// publish will announce again), at each wake, and every listenerPoll
// besides, for a publish lost while the shared connection was being made
// again.
func (c *listenerConn) relayDeliveries(ctx context.Context) error {
	w, err := c.wakes.Wait(listener.DeliveriesChannel(c.listener.ID))
	if err != nil {
		// The hub is closed: the process is stopping.
		return fmt.Errorf("listener %s: wait for deliveries: %w", c.listener.ID, err)
	}
	defer w.Close()
	ready := w.Ready()
	ticker := time.NewTicker(listenerPoll)
	defer ticker.Stop()
	for {
		if err := c.takeDeliveries(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ready:
			ready = nil // once
		case <-w.Woken():
		case <-ticker.C:
		}
	}
}

// takeDeliveries writes to the socket each delivery the listener's list
// holds, until it is empty. Before each write it asks the store whether
// the listener may still be sent one, so that a delivery relayed before
// the key's revocation is not written after it, on whichever process;
// when the store cannot say, the delivery is dropped (its worker records a
// timeout and retries). Redis away leaves the list for the next look: the
// workers wait in vain and retry meanwhile.
func (c *listenerConn) takeDeliveries(ctx context.Context) error {
	key := listener.DeliveriesKey(c.listener.ID)
	for {
		popped, err := c.redis.LPop(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.logger.WarnContext(ctx, "listener: take relayed delivery", "listener_id", c.listener.ID, "error", err)
			return nil
		}
		var d listener.Delivery
		if json.Unmarshal([]byte(popped), &d) != nil {
			continue
		}
		if d.Type == listenerEndType {
			return fmt.Errorf("listener %s: %w", c.listener.ID, errKeyEnded)
		}
		if d.ID == "" {
			continue
		}
		if !c.now().Before(d.Deadline) {
			// Its worker has stopped waiting (recorded a timeout): the
			// retry will bring it again.
			continue
		}
		live, err := c.store.ListenerLive(ctx, c.listener.ID)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.logger.WarnContext(ctx, "listener: check before sending; delivery dropped", "listener_id", c.listener.ID, "error", err)
			continue
		}
		if !live {
			return fmt.Errorf("listener %s: %w", c.listener.ID, store.ErrNotFound)
		}
		c.mu.Lock()
		c.pending[d.ID] = d.Deadline
		c.mu.Unlock()
		if err := c.conn.Write(ctx, websocket.MessageText, []byte(popped)); err != nil {
			return fmt.Errorf("listener %s: write delivery: %w", c.listener.ID, err)
		}
	}
}

// readAnswers relays each answer of the command to the worker waiting on
// it.
func (c *listenerConn) readAnswers(ctx context.Context) error {
	for {
		_, msg, err := c.conn.Read(ctx)
		if err != nil {
			return fmt.Errorf("listener %s: read: %w", c.listener.ID, err)
		}
		var a listener.Answer
		if json.Unmarshal(msg, &a) != nil || a.Type != listener.TypeAnswer {
			continue
		}
		c.mu.Lock()
		_, ok := c.pending[a.ID]
		delete(c.pending, a.ID)
		c.mu.Unlock()
		if !ok {
			continue
		}
		if len(a.Body) > listener.MaxAnswerBody {
			a.Body = a.Body[:listener.MaxAnswerBody]
		}
		b, err := json.Marshal(a)
		if err != nil {
			continue
		}
		key := listener.AnswerKey(a.ID)
		pipe := c.redis.TxPipeline()
		pipe.RPush(ctx, key, b)
		pipe.Expire(ctx, key, answerTTL)
		if _, err := pipe.Exec(ctx); err != nil {
			c.logger.WarnContext(ctx, "listener: relay answer", "listener_id", c.listener.ID, "error", err)
		}
	}
}

// forgetExpired drops the pending deliveries whose worker has stopped
// waiting.
func (c *listenerConn) forgetExpired() {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, deadline := range c.pending {
		if now.After(deadline.Add(answerTTL)) {
			delete(c.pending, id)
		}
	}
}
