package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/webhookd/webhookd/internal/pollcli"
)

// pollCommand runs `webhookd poll SUBSCRIPTION_ID`: it prints what a poll
// subscription holds (pollcli.Reader).
func pollCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("poll", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: webhookd poll SUBSCRIPTION_ID --api URL --api-key KEY [--limit N] [--iterator IT | --since TIME] [--ack [--follow]]")
		fs.PrintDefaults()
	}
	api := fs.String("api", defaultAPI, "the engine's public base URL")
	key := fs.String("api-key", "", "an API key of the merchant with the webhooks:read scope (required)")
	limit := fs.Int("limit", 0, "deliveries per read, 1 to 250 (default 50)")
	iterator := fs.String("iterator", "", "start after this iterator (a previous read's), acknowledging what it names")
	since := fs.String("since", "", "start at the first delivery made at or after this RFC 3339 time")
	ack := fs.Bool("ack", false, "read to the end, acknowledging every delivery printed")
	follow := fs.Bool("follow", false, "with --ack: keep reading, waiting for new deliveries (long polling), until interrupted")
	// The subscription comes first, as in `webhookd poll ID --api …`;
	// flag stops at the first argument, so it is taken off before.
	if len(args) == 0 || len(args[0]) == 0 || args[0][0] == '-' {
		if len(args) > 0 && isHelp(args[0]) {
			fs.Usage()
			return nil
		}
		fs.Usage()
		return errors.New("poll: a subscription id is required, e.g. webhookd poll 0193… --api-key KEY")
	}
	id := args[0]
	if help, err := parseKeyedFlags(fs, args[1:], key); help || err != nil {
		return err
	}
	r := pollcli.Reader{
		Client:         pollcli.Client{API: *api, APIKey: *key, HTTP: &http.Client{Timeout: 45 * time.Second}},
		SubscriptionID: id, Start: pollcli.Query{Iterator: *iterator, Since: *since, Limit: *limit},
		Ack: *ack, Follow: *follow, Out: stdout, Log: stderr,
	}
	if err := r.Run(ctx); err != nil {
		return fmt.Errorf("poll: %w", err)
	}
	return nil
}
