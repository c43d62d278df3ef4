package deliver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// TestSQSAttributes: the verifying and ordering headers always travel,
// the subscription's own next, user-agent only while there is room, and
// more than ten without it is broker_refused.
func TestSQSAttributes(t *testing.T) {
	base := map[string]string{"webhook-id": "msg_1", "webhook-timestamp": "1", "webhook-signature": "v1,x",
		"content-type": "application/json", "user-agent": "webhookd/test"}
	with := func(n int, ordered bool) map[string]string {
		h := maps.Clone(base)
		if ordered {
			h["webhook-ordering-key"], h["webhook-sequence"] = "acct_1", "3"
		}
		for i := range n {
			h[fmt.Sprintf("x-custom-%d", i)] = "v"
		}
		return h
	}
	tests := []struct {
		name      string
		headers   map[string]string
		want      int
		userAgent bool
		refused   bool
	}{
		{"no custom header", with(0, false), 5, true, false},
		{"five custom headers", with(5, false), 10, true, false},
		{"six custom headers: no room for user-agent", with(6, false), 10, false, false},
		{"seven custom headers", with(7, false), 0, false, true},
		{"ordered, four custom headers", with(4, true), 10, false, false},
		{"ordered, five custom headers", with(5, true), 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attrs, err := sqsAttributes(tt.headers)
			var be *brokerError
			if tt.refused {
				if !errors.As(err, &be) || be.code != errBrokerRefused || !strings.Contains(err.Error(), "at most 10") {
					t.Fatalf("err = %v, want broker_refused naming the limit", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(attrs) != tt.want {
				t.Errorf("%d attributes (%v), want %d", len(attrs), slices.Sorted(maps.Keys(attrs)), tt.want)
			}
			for _, n := range []string{"webhook-id", "webhook-timestamp", "webhook-signature", "content-type"} {
				if a, ok := attrs[n]; !ok || aws.ToString(a.DataType) != "String" || aws.ToString(a.StringValue) != tt.headers[n] {
					t.Errorf("attribute %s: %+v", n, a)
				}
			}
			if _, ok := attrs["user-agent"]; ok != tt.userAgent {
				t.Errorf("user-agent sent: %v, want %v", ok, tt.userAgent)
			}
		})
	}
}

// TestSQSGroupID: an ordered message's group is its key, or the key's
// hash when SQS would refuse the key; an unordered one's its delivery id.
func TestSQSGroupID(t *testing.T) {
	long := strings.Repeat("k", 129)
	tests := []struct {
		name, key, want string
	}{
		{"unordered", "", "del_1"},
		{"ordered", "acct_1", "acct_1"},
		{"punctuation", "a/b:c!", "a/b:c!"},
		{"too long", long, "e3b0"},
		{"a space", "acct 1", "e3b0"},
		{"not ASCII", "compte_é", "e3b0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sqsGroupID(message{DeliveryID: "del_1", OrderingKey: tt.key})
			if tt.want == "e3b0" {
				if len(got) != 64 || got != sqsGroupID(message{DeliveryID: "del_2", OrderingKey: tt.key}) {
					t.Errorf("group %q, want the key's SHA-256 in hex, the same for every delivery of the key", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("group %q, want %q", got, tt.want)
			}
		})
	}
	if dedupID(message{DeliveryID: "del_1"}) != "del_1" {
		t.Error("the deduplication id is not the delivery id")
	}
}

// TestClassifySQS: what SQS answered, or did not, gives the attempt's
// error code.
func TestClassifySQS(t *testing.T) {
	status := func(code int, err error) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: err}
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"unknown key", status(400, &smithy.GenericAPIError{Code: "InvalidClientTokenId"}), errAuthFailed},
		{"bad signature", status(403, &smithy.GenericAPIError{Code: "SignatureDoesNotMatch"}), errAuthFailed},
		{"KMS denied", status(400, &smithy.GenericAPIError{Code: "KMS.AccessDeniedException"}), errAuthFailed},
		{"forbidden, no code", status(403, errors.New("forbidden")), errAuthFailed},
		{"no such queue", status(400, &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue"}), errBrokerRefused},
		{"message refused", status(400, &smithy.GenericAPIError{Code: "InvalidParameterValue"}), errBrokerRefused},
		{"service error", status(500, &smithy.GenericAPIError{Code: "InternalError"}), errNotConfirmed},
		{"unavailable", status(503, errors.New("unavailable")), errNotConfirmed},
		{"timeout", fmt.Errorf("send: %w", context.DeadlineExceeded), errNotConfirmed},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), errBrokerUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var be *brokerError
			if err := classifySQS(tt.err); !errors.As(err, &be) || be.code != tt.want {
				t.Errorf("classifySQS(%v) = %v, want %s", tt.err, err, tt.want)
			}
		})
	}
}
