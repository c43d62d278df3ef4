// Package eventbridgetest is a stand-in for EventBridge's PutEvents, in
// process on 127.0.0.1, for the tests of package eventbridge and of the
// engine.
package eventbridgetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/destination/desttest"
)

// No EventBridge server runs on a developer's machine or in CI, and no
// emulator of it is packaged where this project installs from: StandIn
// is one, in process, on 127.0.0.1. It checks each request as
// EventBridge's front door would check its shape (the operation, the
// content type, a SigV4 Authorization header with the key and the
// credential scope of the account, a PutEvents body of 1 to 10 entries
// within EventBridge's bounds, a bus that exists) and answers as
// PutEvents answers. It does not check the signature's value: the SDK
// computes it and AWS alone knows whether it is right.

// The account the stand-in knows.
const (
	Region  = "eu-west-1"
	Key     = "AKIAEVENTBRIDGETEST1"
	Secret  = "eventbridge-test-secret-key"
	Account = "123456789012"
	Bus     = "webhooks"
)

// ARN is the ARN of the stand-in's bus.
const ARN = "arn:aws:events:" + Region + ":" + Account + ":event-bus/" + Bus

// MaxEntry is EventBridge's bound of an entry (and of a PutEvents
// request's entries together): 256 KiB, as AWS documents it, stated here
// apart from the kind's own constant so that the stand-in checks the
// kind rather than agreeing with it.
const MaxEntry = 256 << 10

// Delivered is an event as EventBridge hands it to a rule's target: the
// entry wrapped in EventBridge's envelope, its detail rendered again.
type Delivered struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
	// Bus is where it was put (not part of EventBridge's envelope).
	Bus string `json:"-"`
	// Size is the entry's size as EventBridge counts it.
	Size int `json:"-"`
}

// StandIn is the in-process PutEvents stand-in.
type StandIn struct {
	t    testing.TB
	addr string

	mu  sync.Mutex
	srv *httptest.Server
	// fail is the ErrorCode the next entry fails with; "" to take it.
	fail string
	// probed: a test sends what EventBridge refuses, to see the
	// stand-in refuse it; a refusal is not a test failure then.
	probed bool

	// events are the entries taken, in order, as a target receives them.
	events chan Delivered
	// requests counts the requests that reached the stand-in.
	requests atomic.Int64
}

// New starts a stand-in on a port of 127.0.0.1, stopped at the test's
// end. A request EventBridge would refuse for its shape fails t.
func New(t testing.TB) *StandIn {
	t.Helper()
	s := &StandIn{t: t, events: make(chan Delivered, 64)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.start(ln)
	t.Cleanup(s.stop)
	return s
}

func (s *StandIn) start(ln net.Listener) {
	srv := httptest.NewUnstartedServer(s)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

func (s *StandIn) stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Requests is how many requests reached the stand-in so far.
func (s *StandIn) Requests() int64 { return s.requests.Load() }

// Probe makes the stand-in refuse what EventBridge refuses without
// failing the test: the test sends it on purpose.
func (s *StandIn) Probe() {
	s.mu.Lock()
	s.probed = true
	s.mu.Unlock()
}

// URL is the stand-in's endpoint.
func (s *StandIn) URL() string { return "http://" + s.addr }

// Down stops the stand-in and returns what starts it again on the same
// address (desttest's Down).
func (s *StandIn) Down(t testing.TB) func() {
	s.stop()
	return func() {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			t.Fatalf("listen again on the stand-in's address: %v", err)
		}
		s.start(ln)
	}
}

// FailNext makes the next entry fail with code.
func (s *StandIn) FailNext(code string) {
	s.mu.Lock()
	s.fail = code
	s.mu.Unlock()
}

// Config is a destination object on the stand-in, with extra members.
func (s *StandIn) Config(extra string) string {
	return fmt.Sprintf(`{"type": "eventbridge", "event_bus": %q, "region": %q, "access_key_id": %q, "secret_access_key": %q, "endpoint": %q%s}`,
		Bus, Region, Key, Secret, s.URL(), extra)
}

// Next waits for the next event taken.
func (s *StandIn) Next(ctx context.Context, t testing.TB) Delivered {
	t.Helper()
	select {
	case e := <-s.events:
		return e
	case <-ctx.Done():
		t.Fatal("no event reached the stand-in")
		return Delivered{}
	}
}

// Waiting is how many events the stand-in took that Next has not
// returned yet: an event is there before PutEvents is answered.
func (s *StandIn) Waiting() int { return len(s.events) }

// Receive is desttest's Receive: the next event, unframed as a consumer
// unframes it (Detail).
func (s *StandIn) Receive(ctx context.Context, t testing.TB) desttest.Arrived {
	t.Helper()
	return Unframe(t, s.Next(ctx, t))
}

// Unframe reads what a consumer verifies from an event as a target gets
// it: detail.body's bytes and detail.webhook's headers.
func Unframe(t testing.TB, e Delivered) desttest.Arrived {
	t.Helper()
	var d struct {
		Webhook map[string]string `json:"webhook"`
		Body    string            `json:"body"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		t.Fatalf("the event's detail is not the documented object: %v", err)
	}
	return desttest.Arrived{Body: []byte(d.Body), Headers: d.Webhook}
}

// authorization is a SigV4 Authorization header, its parts taken.
var authorization = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/, ]+)/([0-9]{8})/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request, ` +
	`SignedHeaders=([a-z0-9;-]+), Signature=[0-9a-f]{64}$`)

// ServeHTTP answers one request as EventBridge would.
func (s *StandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/" || r.URL.RawQuery != "" {
		s.refuse(w, http.StatusNotFound, "UnknownOperationException", "not POST /")
		return
	}
	if r.Header.Get("X-Amz-Target") != "AWSEvents.PutEvents" {
		s.refuse(w, http.StatusBadRequest, "UnknownOperationException", "X-Amz-Target is not AWSEvents.PutEvents")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		s.refuse(w, http.StatusBadRequest, "SerializationException", "Content-Type "+ct)
		return
	}
	if !s.authorized(w, r) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		s.refuse(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "a body over 1 MiB")
		return
	}
	var in struct {
		Entries []struct {
			Time         *json.Number `json:"Time"`
			Source       string       `json:"Source"`
			DetailType   string       `json:"DetailType"`
			Detail       string       `json:"Detail"`
			EventBusName string       `json:"EventBusName"`
			Resources    []string     `json:"Resources"`
			TraceHeader  string       `json:"TraceHeader"`
		} `json:"Entries"`
		EndpointID string `json:"EndpointId"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		s.refuse(w, http.StatusBadRequest, "SerializationException", "not a PutEvents body: "+err.Error())
		return
	}
	if n := len(in.Entries); n < 1 || n > 10 {
		s.refuse(w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("%d entries", n))
		return
	}
	var out []map[string]string
	var taken []Delivered
	total := 0
	for _, e := range in.Entries {
		var detail map[string]any
		switch {
		case e.Source == "" || e.DetailType == "" || e.Detail == "":
			s.refuse(w, http.StatusBadRequest, "ValidationException", "an entry without Source, DetailType or Detail")
			return
		case len(e.Source) > 256, strings.HasPrefix(e.Source, "aws."), len(e.DetailType) > 128:
			s.refuse(w, http.StatusBadRequest, "ValidationException", "Source or DetailType out of bounds")
			return
		case e.EventBusName != Bus && e.EventBusName != ARN:
			// Not a test failure: a row names a bus that does not exist.
			answerError(w, http.StatusBadRequest, "ResourceNotFoundException", "Event bus "+e.EventBusName+" does not exist.")
			return
		case json.Unmarshal([]byte(e.Detail), &detail) != nil || detail == nil:
			s.refuse(w, http.StatusBadRequest, "ValidationException", "Detail is not a JSON object")
			return
		}
		size := len(e.Source) + len(e.DetailType) + len(e.Detail)
		if e.Time != nil {
			size += 14
		}
		for _, res := range e.Resources {
			size += len(res)
		}
		if size > MaxEntry {
			s.refuse(w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("an entry of %d bytes", size))
			return
		}
		total += size
		at := time.Now().UTC()
		if e.Time != nil {
			secs, err := e.Time.Float64()
			if err != nil {
				s.refuse(w, http.StatusBadRequest, "SerializationException", "Time is not epoch seconds")
				return
			}
			whole, frac := math.Modf(secs)
			at = time.Unix(int64(whole), int64(frac*1e9)).UTC()
		}
		// EventBridge parses the detail and renders it again for each
		// target: so does the stand-in (Go's own rendering, keys in
		// order), so that what Receive reads is not the bytes sent.
		rendered, _ := json.Marshal(detail)
		taken = append(taken, Delivered{Version: "0", ID: uuid.NewString(), DetailType: e.DetailType, Source: e.Source,
			Account: Account, Time: at.Format(time.RFC3339), Region: Region, Resources: append([]string{}, e.Resources...),
			Detail: rendered, Bus: e.EventBusName, Size: size})
	}
	if total > MaxEntry {
		s.refuse(w, http.StatusBadRequest, "ValidationException", "entries over 256 KiB in all")
		return
	}
	s.mu.Lock()
	fail := s.fail
	s.fail = ""
	s.mu.Unlock()
	failed := 0
	for _, e := range taken {
		if fail != "" {
			out = append(out, map[string]string{"ErrorCode": fail, "ErrorMessage": "arn:aws:iam::" + Account + ":user/webhooks is not allowed"})
			failed++
			continue
		}
		s.events <- e
		out = append(out, map[string]string{"EventId": e.ID})
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(map[string]any{"Entries": out, "FailedEntryCount": failed})
}

// authorized checks the SigV4 header's presence and credential scope:
// the access key (UnrecognizedClientException for another, as AWS
// answers an unknown key), the date of X-Amz-Date, the region and the
// service.
func (s *StandIn) authorized(w http.ResponseWriter, r *http.Request) bool {
	m := authorization.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		s.refuse(w, http.StatusBadRequest, "MissingAuthenticationTokenException", "no SigV4 Authorization header")
		return false
	}
	key, date, region, service, signed := m[1], m[2], m[3], m[4], strings.Split(m[5], ";")
	amzDate := r.Header.Get("X-Amz-Date")
	switch {
	case key != Key:
		// Not a test failure: the wrong-credentials row sends this.
		answerError(w, http.StatusBadRequest, "UnrecognizedClientException", "The security token included in the request is invalid.")
		return false
	case len(amzDate) != 16 || amzDate[:8] != date, region != Region, service != "events":
		s.refuse(w, http.StatusBadRequest, "InvalidSignatureException", "credential scope "+date+"/"+region+"/"+service)
		return false
	case !contains(signed, "host"), !contains(signed, "x-amz-date"):
		s.refuse(w, http.StatusBadRequest, "IncompleteSignatureException", "host or x-amz-date not signed")
		return false
	}
	return true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// refuse answers an error as EventBridge does and fails the test: the
// kind sent what EventBridge would refuse.
func (s *StandIn) refuse(w http.ResponseWriter, status int, code, why string) {
	s.mu.Lock()
	probed := s.probed
	s.mu.Unlock()
	if !probed {
		s.t.Errorf("the stand-in refused a request: %s (%s)", code, why)
	}
	answerError(w, status, code, why)
}

// answerError is an error answer of the JSON 1.1 protocol: the code in
// __type, the text in message.
func answerError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": message})
}
