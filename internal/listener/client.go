package listener

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/webhookd/webhookd/internal/clock"
)

// maxMessage bounds one message from the engine: a delivery's envelope
// (at most the engine's payload limit, 256 KiB by default) and its
// headers, with room to spare.
const maxMessage = 4 << 20

// reconnectEvery is how often a command whose connection dropped tries
// again, within the listener's grace.
const reconnectEvery = time.Second

// Client is `webhookd listen`: it opens a listener on the engine and
// forwards each delivery to a local URL, reporting the local answer back
// as the attempt's outcome.
type Client struct {
	// API is the engine's public base URL, e.g. https://webhooks.example.com.
	API string
	// APIKey is a key of the merchant with the webhooks:write scope.
	APIKey string
	// ForwardTo is the local URL each delivery is POSTed to.
	ForwardTo string
	// Events limits the listener to these types; none is every type.
	Events []string
	// SkipVerify skips the TLS verification of an https ForwardTo (a
	// local server's self-signed certificate). The engine's is always
	// verified.
	SkipVerify bool
	// Out receives one line per delivery.
	Out io.Writer
	// Log receives what the command tells its user: the listener, the
	// secret, reconnects.
	Log io.Writer
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	// outMu keeps the lines of deliveries forwarded at once whole.
	outMu sync.Mutex
}

// APIError is the engine's refusal of a request (the WebSocket handshake
// of listen, a trigger), as the API's error body gives it.
type APIError struct {
	Status         int
	Code           string
	Message        string
	RequiredScopes []string `json:"required_scopes"`
}

// Error says what the engine refused and, for a missing scope, how to get it.
func (e *APIError) Error() string {
	if e.Code == "insufficient_scope" && len(e.RequiredScopes) > 0 {
		return fmt.Sprintf("the API key lacks the %s scope (insufficient_scope): use a key created with it, e.g. `webhookd keys create --merchant ID --scopes %s`",
			strings.Join(e.RequiredScopes, ", "), strings.Join(e.RequiredScopes, ","))
	}
	if e.Code == "" {
		return fmt.Sprintf("the engine refused: HTTP %d", e.Status)
	}
	return fmt.Sprintf("the engine refused: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return clock.System{}.Now()
}

// listenURL is the WebSocket URL of GET /v1/listen.
func (c *Client) listenURL(resume string, secretOnly bool) (string, error) {
	u, err := url.Parse(strings.TrimRight(c.API, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("--api %q: expected the engine's http(s) base URL", c.API)
	}
	u.Path += "/v1/listen"
	q := url.Values{}
	if len(c.Events) > 0 {
		q.Set("events", strings.Join(c.Events, ","))
	}
	if resume != "" {
		q.Set("listener_id", resume)
	}
	if secretOnly {
		q.Set("secret_only", "true")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// connect opens the WebSocket (resuming listener resume, if not empty;
// opening none with secretOnly) and reads the ready message. A refusal of the engine is a *APIError.
func (c *Client) connect(ctx context.Context, resume string, secretOnly bool) (*websocket.Conn, Ready, error) {
	u, err := c.listenURL(resume, secretOnly)
	if err != nil {
		return nil, Ready{}, err
	}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + c.APIKey}}})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			refused := &APIError{Status: resp.StatusCode}
			if resp.Body != nil {
				body, _ := io.ReadAll(resp.Body)
				_ = json.Unmarshal(body, refused)
			}
			return nil, Ready{}, refused
		}
		return nil, Ready{}, fmt.Errorf("connect to %s: %w", c.API, err)
	}
	conn.SetReadLimit(maxMessage)
	_, msg, err := conn.Read(ctx)
	var ready Ready
	if err == nil {
		err = json.Unmarshal(msg, &ready)
	}
	if err != nil || ready.Type != TypeReady {
		conn.CloseNow()
		return nil, Ready{}, fmt.Errorf("the engine's first message is not ready: %v", err)
	}
	return conn, ready, nil
}

// Secret reads the signing secret of the listeners of the API key, without
// opening one: every listener the key opens signs with it.
func (c *Client) Secret(ctx context.Context) (string, error) {
	conn, ready, err := c.connect(ctx, "", true)
	if err != nil {
		return "", err
	}
	conn.CloseNow()
	return ready.Secret, nil
}

// Run listens until ctx is done, reconnecting within the listener's
// grace when the connection drops. It returns nil when ctx ends it, and an
// error when the engine refuses it or cannot be reached for longer than
// the grace.
func (c *Client) Run(ctx context.Context) error {
	forward := c.localClient()
	var current Ready
	var lostAt time.Time
	for {
		resume := ""
		if current.ListenerID != uuid.Nil {
			resume = current.ListenerID.String()
		}
		conn, ready, err := c.connect(ctx, resume, false)
		if err != nil {
			var refused *APIError
			grace := time.Duration(current.GraceSeconds) * time.Second
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.As(err, &refused), lostAt.IsZero(), c.now().Sub(lostAt) > grace:
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(reconnectEvery):
			}
			continue
		}
		switch {
		case lostAt.IsZero():
			fmt.Fprintf(c.Log, "Ready! Listener %s forwards %s to %s\n", ready.ListenerID, strings.Join(ready.Events, ", "), c.ForwardTo)
			fmt.Fprintf(c.Log, "Your webhook signing secret is %s (the same for every listener of this API key)\n", ready.Secret)
		case ready.ListenerID != current.ListenerID:
			fmt.Fprintf(c.Log, "Reconnected too late: new listener %s; deliveries pending on %s have stopped\n", ready.ListenerID, current.ListenerID)
		default:
			fmt.Fprintf(c.Log, "Reconnected to listener %s\n", ready.ListenerID)
		}
		current, lostAt = ready, time.Time{}
		err = c.serve(ctx, conn, forward)
		if ctx.Err() != nil {
			_ = conn.Close(websocket.StatusNormalClosure, "stopped")
			return nil
		}
		conn.CloseNow()
		lostAt = c.now()
		fmt.Fprintf(c.Log, "Connection lost (%v); reconnecting for up to %ds\n", err, current.GraceSeconds)
	}
}

// serve forwards the deliveries of one connection until it drops.
func (c *Client) serve(ctx context.Context, conn *websocket.Conn, forward *http.Client) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		var d Delivery
		if json.Unmarshal(msg, &d) != nil || d.Type != TypeDelivery {
			continue
		}
		wg.Go(func() {
			a := c.forward(ctx, forward, d)
			b, err := json.Marshal(a)
			if err != nil {
				return
			}
			// A lost answer is a timeout for the engine, retried.
			_ = conn.Write(ctx, websocket.MessageText, b)
		})
	}
}

// localClient is the client of the local server: no proxy, no redirects
// followed, TLS verification as SkipVerify says.
func (c *Client) localClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:           nil,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: c.SkipVerify}, //nolint:gosec // asked for, for a local server
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// forward POSTs one delivery to ForwardTo, exactly as the engine would
// have: its body and headers, and returns the answer for the engine.
func (c *Client) forward(ctx context.Context, client *http.Client, d Delivery) (a Answer) {
	a = Answer{Type: TypeAnswer, ID: d.ID}
	ctx, cancel := context.WithDeadline(ctx, d.Deadline)
	defer cancel()
	started := c.now()
	defer func() {
		a.DurationMS = int(c.now().Sub(started).Milliseconds())
		c.report(started, d, a)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.ForwardTo, strings.NewReader(d.Body))
	if err != nil {
		a.Error = "network_error"
		return a
	}
	for k, v := range d.Headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		a.Error = localError(ctx, err)
		return a
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBody))
	a.Status, a.Body = resp.StatusCode, string(bytes.ToValidUTF8(body, []byte("\uFFFD")))
	return a
}

// localError names why the local server gave no answer, with the codes of
// the delivery log.
func localError(ctx context.Context, err error) string {
	var netErr net.Error
	var tlsErr *tls.CertificateVerificationError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.As(err, &tlsErr), strings.Contains(err.Error(), "tls: "):
		return "tls_error"
	default:
		return "network_error"
	}
}

// report prints one line per delivery: time, event type, event id, local
// status (or error) and duration.
func (c *Client) report(started time.Time, d Delivery, a Answer) {
	outcome := a.Error
	if a.Status != 0 {
		outcome = fmt.Sprintf("%d", a.Status)
	}
	c.outMu.Lock()
	defer c.outMu.Unlock()
	fmt.Fprintf(c.Out, "%s  %-20s  %s  → %s  (%d ms)\n", started.UTC().Format("2006-01-02 15:04:05"), d.EventType, d.EventID, outcome, a.DurationMS)
}
