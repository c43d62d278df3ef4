package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/webhookd/webhookd/internal/listener"
)

// trigger runs `webhookd trigger TYPE`: the engine publishes an example
// event of TYPE to the merchant's own subscriptions (sandbox only).
func trigger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("trigger", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: webhookd trigger TYPE --api URL --api-key KEY")
		fs.PrintDefaults()
	}
	api := fs.String("api", defaultAPI, "the engine's public base URL")
	key := fs.String("api-key", "", "an API key of the merchant with the webhooks:write scope (required)")
	// The type comes first, as in `webhookd trigger payout.paid --api …`;
	// flag stops at the first argument, so it is taken off before.
	if len(args) == 0 || len(args[0]) == 0 || args[0][0] == '-' {
		if len(args) > 0 && isHelp(args[0]) {
			fs.Usage()
			return nil
		}
		fs.Usage()
		return errors.New("trigger: an event type is required, e.g. webhookd trigger payout.paid")
	}
	typ := args[0]
	if help, err := parseKeyedFlags(fs, args[1:], key); help || err != nil {
		return err
	}
	id, err := listener.TriggerEvent(ctx, &http.Client{Timeout: 30 * time.Second}, *api, *key, typ)
	if err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	fmt.Fprintf(stdout, "Triggered %s: event %s\n", typ, id)
	return nil
}
