package eventbridgetest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"
)

// TestStandInRefuses: the stand-in's checks are live, so that a kind
// that sends what EventBridge refuses fails the tests above.
func TestStandInRefuses(t *testing.T) {
	s := New(t)
	s.Probe()
	client := func(region string) *eventbridge.Client {
		return eventbridge.New(eventbridge.Options{Region: region, BaseEndpoint: aws.String(s.URL()), Retryer: aws.NopRetryer{},
			Credentials: credentials.NewStaticCredentialsProvider(Key, Secret, "")})
	}
	entry := func(detail string) types.PutEventsRequestEntry {
		return types.PutEventsRequestEntry{EventBusName: aws.String(Bus), Source: aws.String("webhookd"),
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
		{"eleven entries", Region, eleven, "ValidationException"},
		{"a detail that is not an object", Region, []types.PutEventsRequestEntry{entry(`[1]`)}, "ValidationException"},
		{"an entry over 256 KiB", Region, []types.PutEventsRequestEntry{entry(`{"a":"` + strings.Repeat("a", MaxEntry) + `"}`)}, "ValidationException"},
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
