package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/webhookd/webhookd/internal/listener"
)

// defaultAPI is the engine `make run` starts. The developer's commands
// read no WEBHOOKD_* variable: those configure an engine, which warns of
// any it does not know.
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
	api := fs.String("api", defaultAPI, "the engine's public base URL")
	key := fs.String("api-key", "", "an API key of the merchant with the webhooks:write scope (required)")
	forwardTo := fs.String("forward-to", "", "the local URL each delivery is POSTed to, e.g. http://localhost:3000/webhooks")
	events := fs.String("events", "", "comma-separated event types to receive (default: every type)")
	printSecret := fs.Bool("print-secret", false, "print the signing secret and exit")
	skipVerify := fs.Bool("skip-verify", false, "do not verify the TLS certificate of an https --forward-to")
	if help, err := parseKeyedFlags(fs, args, key); help || err != nil {
		return err
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

// parseKeyedFlags parses the flags of a command that acts with a merchant's
// API key (listen, trigger): help asked for is (true, nil); a stray
// argument or no --api-key is an error that names the command.
func parseKeyedFlags(fs *flag.FlagSet, args []string, key *string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, err
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	if *key == "" {
		return false, fmt.Errorf("%s: --api-key is required", fs.Name())
	}
	return false, nil
}
