package eventbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/destination/desttest"
)

// No EventBridge server runs on a developer's machine or in CI, and no
// emulator of it is packaged where this project installs from: standIn
// is one, in process, on 127.0.0.1. It checks each request as
// EventBridge's front door would check its shape (the operation, the
// content type, a SigV4 Authorization header with the key and the
// credential scope of the account, a PutEvents body of 1 to 10 entries
// within EventBridge's bounds, a bus that exists) and answers as
// PutEvents answers. It does not check the signature's value: the SDK
// computes it and AWS alone knows whether it is right.

// The account the stand-in knows.
const (
	standInRegion  = "eu-west-1"
	standInKey     = "AKIAEVENTBRIDGETEST1"
	standInSecret  = "eventbridge-test-secret-key"
	standInAccount = "123456789012"
	standInBus     = "webhooks"
)

// standInARN is the ARN of the stand-in's bus.
const standInARN = "arn:aws:events:" + standInRegion + ":" + standInAccount + ":event-bus/" + standInBus

// delivered is an event as EventBridge hands it to a rule's target: the
// entry wrapped in EventBridge's envelope, its detail rendered again.
type delivered struct {
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

// standIn is the in-process PutEvents stand-in.
type standIn struct {
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
	events chan delivered
	// requests counts the requests that reached the stand-in.
	requests atomic.Int64
}

// newStandIn starts a stand-in on a port of 127.0.0.1, stopped at the
// test's end.
func newStandIn(t testing.TB) *standIn {
	t.Helper()
	s := &standIn{t: t, events: make(chan delivered, 64)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.start(ln)
	t.Cleanup(s.stop)
	return s
}

func (s *standIn) start(ln net.Listener) {
	srv := httptest.NewUnstartedServer(s)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

func (s *standIn) stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// URL is the stand-in's endpoint.
func (s *standIn) URL() string { return "http://" + s.addr }

// down stops the stand-in and returns what starts it again on the same
// address.
func (s *standIn) down(t testing.TB) func() {
	s.stop()
	return func() {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			t.Fatalf("listen again on the stand-in's address: %v", err)
		}
		s.start(ln)
	}
}

// failNext makes the next entry fail with code.
func (s *standIn) failNext(code string) {
	s.mu.Lock()
	s.fail = code
	s.mu.Unlock()
}

// config is a destination on the stand-in, with extra members.
func (s *standIn) config(extra string) string {
	return fmt.Sprintf(`{"type": "eventbridge", "event_bus": %q, "region": %q, "access_key_id": %q, "secret_access_key": %q, "endpoint": %q%s}`,
		standInBus, standInRegion, standInKey, standInSecret, s.URL(), extra)
}

// next waits for the next event taken.
func (s *standIn) next(ctx context.Context, t testing.TB) delivered {
	t.Helper()
	select {
	case e := <-s.events:
		return e
	case <-ctx.Done():
		t.Fatal("no event reached the stand-in")
		return delivered{}
	}
}

// receive is desttest's Receive: the next event, unframed as a consumer
// unframes it (Detail).
func (s *standIn) receive(ctx context.Context, t testing.TB) desttest.Arrived {
	t.Helper()
	return unframe(t, s.next(ctx, t))
}

// unframe reads what a consumer verifies from an event as a target gets
// it: detail.body's bytes and detail.webhook's headers.
func unframe(t testing.TB, e delivered) desttest.Arrived {
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
func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	var taken []delivered
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
		case e.EventBusName != standInBus && e.EventBusName != standInARN:
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
		taken = append(taken, delivered{Version: "0", ID: uuid.NewString(), DetailType: e.DetailType, Source: e.Source,
			Account: standInAccount, Time: at.Format(time.RFC3339), Region: standInRegion, Resources: append([]string{}, e.Resources...),
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
			out = append(out, map[string]string{"ErrorCode": fail, "ErrorMessage": "arn:aws:iam::" + standInAccount + ":user/webhooks is not allowed"})
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
func (s *standIn) authorized(w http.ResponseWriter, r *http.Request) bool {
	m := authorization.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		s.refuse(w, http.StatusBadRequest, "MissingAuthenticationTokenException", "no SigV4 Authorization header")
		return false
	}
	key, date, region, service, signed := m[1], m[2], m[3], m[4], strings.Split(m[5], ";")
	amzDate := r.Header.Get("X-Amz-Date")
	switch {
	case key != standInKey:
		// Not a test failure: the wrong-credentials row sends this.
		answerError(w, http.StatusBadRequest, "UnrecognizedClientException", "The security token included in the request is invalid.")
		return false
	case len(amzDate) != 16 || amzDate[:8] != date, region != standInRegion, service != "events":
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
func (s *standIn) refuse(w http.ResponseWriter, status int, code, why string) {
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

// TestStandInRefuses: the stand-in's checks are live, so that a kind
// that sends what EventBridge refuses fails the tests above.
func TestStandInRefuses(t *testing.T) {
	s := newStandIn(t)
	s.mu.Lock()
	s.probed = true
	s.mu.Unlock()
	client := func(region string) *eventbridge.Client {
		return eventbridge.New(eventbridge.Options{Region: region, BaseEndpoint: aws.String(s.URL()), Retryer: aws.NopRetryer{},
			Credentials: credentials.NewStaticCredentialsProvider(standInKey, standInSecret, "")})
	}
	entry := func(detail string) types.PutEventsRequestEntry {
		return types.PutEventsRequestEntry{EventBusName: aws.String(standInBus), Source: aws.String("webhookd"),
			DetailType: aws.String("payout.paid"), Detail: aws.String(detail)}
	}
	eleven := make([]types.PutEventsRequestEntry, 11)
	for i := range eleven {
		eleven[i] = entry(`{}`)
	}
	for _, tc := range []struct {
		name, region string
		entries      []types.PutEventsRequestEntry
		want         string
	}{
		{"a credential scope of another region", "us-east-1", []types.PutEventsRequestEntry{entry(`{}`)}, "InvalidSignatureException"},
		{"eleven entries", standInRegion, eleven, "ValidationException"},
		{"a detail that is not an object", standInRegion, []types.PutEventsRequestEntry{entry(`[1]`)}, "ValidationException"},
		{"an entry over 256 KiB", standInRegion, []types.PutEventsRequestEntry{entry(`{"a":"` + strings.Repeat("a", MaxEntry) + `"}`)}, "ValidationException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := client(tc.region).PutEvents(ctx, &eventbridge.PutEventsInput{Entries: tc.entries})
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != tc.want {
				t.Errorf("PutEvents: %v, want %s", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, target, contentType, want string
	}{
		{"no Authorization header", "AWSEvents.PutEvents", "application/x-amz-json-1.1", "MissingAuthenticationTokenException"},
		{"another operation", "AWSEvents.DeleteRule", "application/x-amz-json-1.1", "UnknownOperationException"},
		{"another content type", "AWSEvents.PutEvents", "application/json", "SerializationException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, s.URL()+"/", strings.NewReader(`{"Entries":[]}`))
			req.Header.Set("X-Amz-Target", tc.target)
			req.Header.Set("Content-Type", tc.contentType)
			// A transport of its own: no environment's proxy.
			resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var answer struct {
				Type string `json:"__type"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&answer)
			if resp.StatusCode < 400 || answer.Type != tc.want {
				t.Errorf("answered %d %s, want %s", resp.StatusCode, answer.Type, tc.want)
			}
		})
	}
}
