package main

import (
	"fmt"
	"strings"

	"github.com/webhookd/webhookd/internal/destination/sqs"
)

// parseSQSEngineQueues reads WEBHOOKD_SQS_ENGINE_CREDENTIALS: the queue
// URL prefixes (comma separated) under which an sqs destination may be
// given without an access key and sent with the engine's own AWS
// credentials; empty, the default, never. A list rather than a switch:
// the engine's role may reach queues that belong to no merchant (the
// operator's own), so allowing it names the accounts or queues where
// merchants' queues live, each ending in "/".
func parseSQSEngineQueues(raw []string) ([]string, error) {
	var out []string
	for _, p := range raw {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if err := sqs.CheckEngineQueues(out); err != nil {
		return nil, fmt.Errorf("expected queue URL prefixes such as https://sqs.eu-west-1.amazonaws.com/123456789012/: %w", err)
	}
	return out, nil
}
