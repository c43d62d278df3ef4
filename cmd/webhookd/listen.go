package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/webhookd/webhookd/listener"
)

// defaultAPI is the engine `make run` starts.
const defaultAPI = "http://127.0.0.1:8080"

// listen runs `webhookd listen`: it relays the merchant's deliveries to a
// local server until interrupted (listener.Client).
func listen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("listen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: webhookd listen --api URL --api-key KEY --forward-to URL [--events a,b] [--print-secret] [--skip-verify]")
		fs.PrintDefaults()
	}
	api := fs.String("api", envOr("WEBHOOKD_API", defaultAPI), "the engine's public base URL (WEBHOOKD_API)")
	key := fs.String("api-key", os.Getenv("WEBHOOKD_API_KEY"), "an API key with the webhooks:write scope (WEBHOOKD_API_KEY)")
	forwardTo := fs.String("forward-to", "", "the local URL each delivery is POSTed to, e.g. http://localhost:3000/webhooks")
	events := fs.String("events", "", "comma-separated event types to receive (default: every type)")
	printSecret := fs.Bool("print-secret", false, "print the signing secret and exit")
	skipVerify := fs.Bool("skip-verify", false, "do not verify the TLS certificate of an https --forward-to")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("listen: unexpected argument %q", fs.Arg(0))
	}
	if *key == "" {
		return errors.New("listen: --api-key (or WEBHOOKD_API_KEY) is required")
	}
	c := &listener.Client{API: *api, APIKey: *key, ForwardTo: *forwardTo, Events: splitList(*events),
		SkipVerify: *skipVerify, Out: stdout, Log: stderr}
	if *printSecret {
		secret, err := c.Secret(ctx)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		fmt.Fprintln(stdout, secret)
		return nil
	}
	if *forwardTo == "" {
		return errors.New("listen: --forward-to is required, e.g. --forward-to http://localhost:3000/webhooks")
	}
	if err := c.Run(ctx); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return nil
}

// envOr is the environment variable name, or def when it is unset.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
