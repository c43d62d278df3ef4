package keyscli_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/keyscli"
)

// run runs the command and returns its stdout, stderr and error.
func run(env keyscli.Env, args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	err := keyscli.Run(context.Background(), args, env, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// TestCommands runs list, roll and revoke against a real internal API,
// found from the environment as the engine's own variables say.
func TestCommands(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	first := e.issue(t, "m1")
	env := keyscli.Env{InternalListen: strings.TrimPrefix(e.url, "http://"), IngestToken: testToken}

	out, _, err := run(env, "list", "--merchant", "m1")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], first.ID.String()) ||
		!strings.Contains(lines[1], first.Prefix) || !strings.Contains(lines[1], "active") || strings.Contains(out, first.Key) {
		t.Fatalf("list printed:\n%s", out)
	}

	out, errOut, err := run(env, "roll", "--merchant", "m1", "--key", first.ID.String(), "--overlap", "1h")
	if err != nil {
		t.Fatal(err)
	}
	newKey := strings.TrimSpace(out)
	if !strings.HasPrefix(newKey, "sandbox.") || !strings.Contains(errOut, "works until 20") {
		t.Fatalf("roll printed %q on stdout, %q on stderr", out, errOut)
	}
	out, _, err = run(env, "list", "--merchant", "m1")
	if err != nil || !strings.Contains(out, "expiring") || !strings.Contains(out, newKey[:len("sandbox.")+6]) {
		t.Fatalf("list after the roll (%v):\n%s", err, out)
	}

	out, _, err = run(env, "revoke", "--merchant", "m1", "--key", first.ID.String(), "--api", e.url, "--token", testToken)
	if err != nil || !strings.HasPrefix(out, "revoked key "+first.ID.String()) {
		t.Fatalf("revoke printed %q, %v", out, err)
	}
	if out, _, err := run(env, "list", "--merchant", "m_none"); err != nil || !strings.Contains(out, "no API keys") {
		t.Errorf("list of a merchant with no key: %q, %v", out, err)
	}
	// An engine listening on every address is reached on loopback.
	_, port, _ := net.SplitHostPort(env.InternalListen)
	for _, listen := range []string{"0.0.0.0:" + port, ":" + port, "[::]:" + port} {
		if _, _, err := run(keyscli.Env{InternalListen: listen, IngestToken: testToken}, "list", "--merchant", "m1"); err != nil {
			t.Errorf("WEBHOOKD_INTERNAL_LISTEN=%s: %v", listen, err)
		}
	}
}

// TestCommandErrors: every mistake is named, before any call when it can
// be.
func TestCommandErrors(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	first := e.issue(t, "m1")
	env := keyscli.Env{InternalListen: strings.TrimPrefix(e.url, "http://"), IngestToken: testToken}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := closed.Addr().String()
	closed.Close()
	for _, tc := range []struct {
		name string
		env  keyscli.Env
		args []string
		want string
	}{
		{"no merchant", env, []string{"list"}, "--merchant is required"},
		{"no key id", env, []string{"revoke", "--merchant", "m1"}, "--key is required"},
		{"an argument", env, []string{"list", "--merchant", "m1", "extra"}, `unexpected argument "extra"`},
		{"a negative overlap", env, []string{"roll", "--merchant", "m1", "--key", first.ID.String(), "--overlap", "-1s"}, "whole number of seconds"},
		{"no token", keyscli.Env{InternalListen: env.InternalListen}, []string{"list", "--merchant", "m1"}, "WEBHOOKD_INGEST_TOKEN"},
		{"a wrong token", env, []string{"list", "--merchant", "m1", "--token", "wrong"}, "refused the ingest token"},
		{"a malformed key id", env, []string{"revoke", "--merchant", "m1", "--key", "k1"}, "400 parameter_invalid: key_id must be a UUID. (key_id)"},
		{"another merchant's key", env, []string{"revoke", "--merchant", "m2", "--key", first.ID.String()}, "404 resource_not_found"},
		{"an overlap over the maximum", env, []string{"roll", "--merchant", "m1", "--key", first.ID.String(), "--overlap", "721h"}, "overlap_seconds must be between 0 and 2592000"},
		{"no such key", env, []string{"roll", "--merchant", "m1", "--key", uuid.NewString()}, "404 resource_not_found"},
		{"an engine not running", keyscli.Env{InternalListen: nowhere, IngestToken: testToken}, []string{"list", "--merchant", "m1"}, "cannot reach the internal API at http://" + nowhere},
		{"a listen address that is not one", keyscli.Env{InternalListen: "nohost", IngestToken: testToken}, []string{"list", "--merchant", "m1"}, "WEBHOOKD_INTERNAL_LISTEN \"nohost\" is not host:port"},
		{"an unknown command", env, []string{"rotate"}, "expected one of list, revoke, roll"},
	} {
		_, _, err := run(tc.env, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
	if out, errOut, err := run(env, "list", "--help"); err != nil || !strings.Contains(out, "webhookd keys roll") || errOut != "" {
		t.Errorf("--help: %v, stdout %q, stderr %q; want the usage on stdout", err, out, errOut)
	}
	if _, errOut, err := run(env, "list", "--merchnt", "m1"); err == nil || !strings.Contains(errOut, "usage:") {
		t.Errorf("a misspelt flag: %v, stderr %q; want an error and the usage on stderr", err, errOut)
	}
}
