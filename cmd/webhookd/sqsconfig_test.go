package main

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// TestSQSEngineCredentialsVariable: off unless set; a comma list of
// queue URL prefixes, each ending in "/"; anything else refused, naming
// the variable.
func TestSQSEngineCredentialsVariable(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  []string // nil with ok false: refused
		ok    bool
	}{
		{"", nil, true},
		{"https://sqs.eu-west-1.amazonaws.com/123456789012/", []string{"https://sqs.eu-west-1.amazonaws.com/123456789012/"}, true},
		{" https://sqs.eu-west-1.amazonaws.com/123456789012/ , https://sqs.us-east-1.amazonaws.com/210987654321/,",
			[]string{"https://sqs.eu-west-1.amazonaws.com/123456789012/", "https://sqs.us-east-1.amazonaws.com/210987654321/"}, true},
		{"true", nil, false},
		{"123456789012", nil, false},
		{"https://sqs.eu-west-1.amazonaws.com/123456789012", nil, false},
		{"https://sqs.eu-west-1.amazonaws.com/123456789012/,sqs.amazonaws.com/", nil, false},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Setenv("WEBHOOKD_SQS_ENGINE_CREDENTIALS", tc.value)
			c, err := loadConfig(slog.New(slog.DiscardHandler))
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), "WEBHOOKD_SQS_ENGINE_CREDENTIALS") {
					t.Fatalf("loadConfig() error = %v, want one naming WEBHOOKD_SQS_ENGINE_CREDENTIALS", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.SQSEngineQueues, tc.want) {
				t.Errorf("queues %q, want %q", c.SQSEngineQueues, tc.want)
			}
		})
	}
}
