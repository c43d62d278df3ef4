package keyscli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Env is what the command reads of the environment: its flags' defaults.
type Env struct {
	// InternalListen is WEBHOOKD_INTERNAL_LISTEN (host:port), the default
	// of --api.
	InternalListen string
	// IngestToken is WEBHOOKD_INGEST_TOKEN, the default of --token.
	IngestToken string
}

// commands are the subcommands of `webhookd keys` this package runs.
var commands = []string{"list", "revoke", "roll"}

// Handles tells whether `webhookd keys <command>` is one of this package's.
func Handles(command string) bool { return slices.Contains(commands, command) }

// usage is the help of the three subcommands.
const usage = `usage:
  webhookd keys list   --merchant ID
  webhookd keys revoke --merchant ID --key KEY_ID
  webhookd keys roll   --merchant ID --key KEY_ID [--overlap 24h]

They call the internal API of a running engine:
  --api URL      the internal listener (default: http:// and WEBHOOKD_INTERNAL_LISTEN)
  --token TOKEN  the ingest token (default: WEBHOOKD_INGEST_TOKEN)

list prints every key of the merchant, revoked and expired ones included.
revoke ends a key at once, on every process of the engine.
roll issues a successor with the same scopes and prints it on the last line of
stdout; the old key keeps working for --overlap (default 24h, 0s ends it now,
at most 720h), then is refused.
`

// Run runs `webhookd keys <args…>`, args[0] being list, revoke or roll.
func Run(ctx context.Context, args []string, env Env, stdout, stderr io.Writer) error {
	if len(args) == 0 || !Handles(args[0]) {
		return fmt.Errorf("keys: expected one of %s", strings.Join(commands, ", "))
	}
	command := args[0]
	fs := flag.NewFlagSet("keys "+command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The usage goes to stdout when asked for, to stderr after a mistake.
	fs.Usage = func() {}
	api := fs.String("api", "", "the internal API's URL")
	token := fs.String("token", env.IngestToken, "the ingest token")
	merchant := fs.String("merchant", "", "the merchant id")
	var keyID string
	var overlap *time.Duration
	if command != "list" {
		fs.StringVar(&keyID, "key", "", "the key's id, as keys list shows it")
	}
	if command == "roll" {
		fs.Func("overlap", "how long the old key keeps working (default 24h)", func(s string) error {
			d, err := time.ParseDuration(s)
			if err != nil {
				return err
			}
			if d < 0 || d%time.Second != 0 {
				return errors.New("must be a whole number of seconds, 0s or more")
			}
			overlap = &d
			return nil
		})
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return nil
		}
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("keys %s: %w", command, err)
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("keys %s: unexpected argument %q (flags only; see --help)", command, fs.Arg(0))
	case *merchant == "":
		return fmt.Errorf("keys %s: --merchant is required", command)
	case command != "list" && keyID == "":
		return fmt.Errorf("keys %s: --key is required (the key's id, as keys list shows it)", command)
	case *token == "":
		return fmt.Errorf("keys %s: no ingest token: pass --token or set WEBHOOKD_INGEST_TOKEN", command)
	}
	base, err := apiURL(*api, env.InternalListen)
	if err != nil {
		return fmt.Errorf("keys %s: %w", command, err)
	}
	c := NewClient(base, *token)
	switch command {
	case "list":
		err = list(ctx, c, *merchant, stdout)
	case "revoke":
		err = revoke(ctx, c, *merchant, keyID, stdout)
	default:
		err = roll(ctx, c, *merchant, keyID, overlap, stdout, stderr)
	}
	if IsUnauthorized(err) {
		return fmt.Errorf("keys %s: the engine refused the ingest token (--token, WEBHOOKD_INGEST_TOKEN): %w", command, err)
	}
	if err != nil {
		return fmt.Errorf("keys %s: %w", command, err)
	}
	return nil
}

// apiURL is --api, or the URL of the internal listener the environment
// names; a listener on every address is reached on loopback.
func apiURL(flagValue, listen string) (string, error) {
	if flagValue != "" {
		if !strings.Contains(flagValue, "://") {
			flagValue = "http://" + flagValue
		}
		return flagValue, nil
	}
	if listen == "" {
		listen = "127.0.0.1:8081"
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("WEBHOOKD_INTERNAL_LISTEN %q is not host:port; pass --api: %w", listen, err)
	}
	if addr, err := netip.ParseAddr(host); host == "" || err == nil && addr.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

func list(ctx context.Context, c *Client, merchant string, stdout io.Writer) error {
	keys, err := c.List(ctx, merchant)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		fmt.Fprintf(stdout, "merchant %s has no API keys\n", merchant)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tSTATUS\tSCOPES\tCREATED\tLAST USED\tEXPIRES\tREVOKED")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, prefixOf(k), k.Status, strings.Join(k.Scopes, ","),
			stamp(&k.CreatedAt), stamp(k.LastUsedAt), stamp(k.ExpiresAt), stamp(k.RevokedAt))
	}
	return tw.Flush()
}

func revoke(ctx context.Context, c *Client, merchant, keyID string, stdout io.Writer) error {
	k, err := c.Revoke(ctx, merchant, keyID)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked key %s (%s) of merchant %s at %s\n", k.ID, prefixOf(k), merchant, stamp(k.RevokedAt))
	return nil
}

// roll prints what happened on stderr and the new key alone on stdout's
// last line, as `keys create` does, so that a script can take it.
func roll(ctx context.Context, c *Client, merchant, keyID string, overlap *time.Duration, stdout, stderr io.Writer) error {
	var seconds *int64
	if overlap != nil {
		s := int64(*overlap / time.Second)
		seconds = &s
	}
	issued, err := c.Roll(ctx, merchant, keyID, seconds)
	if err != nil {
		return err
	}
	until := "its expiry"
	// The old key's exact expiry is the engine's; ask for it rather than
	// guess from this machine's clock.
	if keys, err := c.List(ctx, merchant); err == nil {
		for _, k := range keys {
			if k.ID == keyID && k.ExpiresAt != nil {
				until = stamp(k.ExpiresAt)
			}
		}
	}
	fmt.Fprintf(stderr, "webhookd: keys roll: new key %s (%s), scopes %s; the old key %s works until %s\n",
		issued.ID, prefixOf(issued.Key), strings.Join(issued.Scopes, ","), keyID, until)
	fmt.Fprintln(stdout, issued.Secret)
	return nil
}

func prefixOf(k Key) string {
	if k.Prefix == nil {
		return "(not kept)"
	}
	return *k.Prefix
}

// stamp shows a time in UTC to the second, or "-" when there is none.
func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
