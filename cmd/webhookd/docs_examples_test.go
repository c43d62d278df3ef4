package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// docsBlock is one ```sh block of a page.
type docsBlock struct {
	file string // relative to the repository's root
	line int    // of the opening fence
	text string
}

func (b docsBlock) firstLine() string {
	first, _, _ := strings.Cut(strings.TrimSpace(b.text), "\n")
	return first
}

// docsSkipped are the shell blocks that cannot run against a test engine by
// their nature, each named by its page and a substring found in that block
// only, with the reason. Every other ```sh block of README.md and docs/*.md
// runs.
var docsSkipped = []struct{ file, contains, why string }{
	{"docs/development.md", "bash scripts/test", "runs the test suite itself"},
	{"docs/development.md", "docker compose up", "needs Docker"},
	{"docs/operations.md", "go build -o webhookd", "builds and starts an engine: the README's run command"},
	{"docs/operations.md", "dashboards/render/render.sh", "installs services, runs Prometheus and six minutes of load"},
	{"docs/ordering.md", "-scenario ordered", "the benchmark"},
	{"docs/portal-ui.md", "go test -count=1 -run TestPortal", "runs tests, with a browser"},
	{"docs/receiver.md", "go get github.com/webhookd/webhookd/receiver\n", "adds the module to the reader's own module, from the network"},
	{"docs/receiver.md", "go get github.com/webhookd/webhookd/receiver/jwe\n", "adds the module to the reader's own module, from the network"},
	{"docs/egress.md", "curl https://webhooks.example.com", "a production engine"},
	{"docs/listen.md", "--api https://webhooks.example.com --api-key \"$KEY\" \\", "a production engine (and the synopsis of the flags)"},
	{"docs/listen.md", "trigger payout.paid --api https://webhooks.example.com", "a production engine"},
	{"docs/ordering.md", "curl -s https://webhooks.example.com", "a production engine"},
	{"docs/endpoint-security.md", "openssl s_server", "starts a TLS server that runs until stopped"},
	{"docs/endpoint-security.md", "https://hooks.example.com/webhooks -d", "the merchant's own endpoint"},
	{"docs/endpoint-security.md", "-d grant_type=client_credentials", "the merchant's own authorization server"},
}

// TestDocsShellExamplesRun runs every shell example of README.md and
// docs/*.md against a real engine, as a reader would paste them: each
// page's blocks in order in one bash session (later blocks use the
// variables of earlier ones, such as KEY), under `set -euo pipefail`, with
// curl failing on an HTTP error (--fail-with-body) and ./webhookd the
// built binary in the session's directory.
//
// The engine is started as the README's run command starts it (ingest
// token dev-ingest-token, plain HTTP and private targets allowed), on a
// fresh database and a private Redis, and on free ports rather than
// 127.0.0.1:8080 and :8081 so that it runs beside other tests and a
// developer's own engine: the blocks' URLs are rewritten to its addresses
// (and 127.0.0.1:9000, where the examples' endpoint listens, to a free
// one). The WEBHOOKD_* variables of the session are those a second
// terminal beside the README's engine has by default: the database and
// Redis URLs and the internal listener, which the CLI reads.
func TestDocsShellExamplesRun(t *testing.T) {
	storetest.FullLane(t, "builds and runs the real binary, and every shell example against it")
	t.Parallel() // its engine is on free ports and it measures no latency
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := docsShellBlocks(t, root)

	// Which blocks run, and a skip entry that names no block is an error
	// (the page changed: the list must follow).
	runs := map[string][]docsBlock{}
	var files []string
	skipped := 0
	for _, s := range docsSkipped {
		n := 0
		for _, b := range blocks {
			if b.file == s.file && strings.Contains(b.text, s.contains) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("docsSkipped: %q matches %d blocks of %s, want 1", s.contains, n, s.file)
		}
	}
	for _, b := range blocks {
		if i := slices.IndexFunc(docsSkipped, func(s struct{ file, contains, why string }) bool {
			return b.file == s.file && strings.Contains(b.text, s.contains)
		}); i >= 0 {
			t.Logf("skip %s:%d %q: %s", b.file, b.line, b.firstLine(), docsSkipped[i].why)
			skipped++
			continue
		}
		if _, ok := runs[b.file]; !ok {
			files = append(files, b.file)
		}
		runs[b.file] = append(runs[b.file], b)
	}

	dbURL := storetest.NewDatabase(t)
	e := newEngineOn(t, dbURL, "WEBHOOKD_INGEST_TOKEN=dev-ingest-token")
	e.start()
	endpoint := storetest.FreeAddr(t)
	rewrite := strings.NewReplacer(
		"127.0.0.1:8080", e.public,
		"127.0.0.1:8081", e.internal,
		"127.0.0.1:9000", endpoint,
	)
	env := []string{
		"WEBHOOKD_DATABASE_URL=" + dbURL,
		"WEBHOOKD_REDIS_URL=" + e.redis.URL(),
		"WEBHOOKD_INTERNAL_LISTEN=" + e.internal,
		// go run in docs/receiver.md's module: this checkout, no network.
		"GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off",
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEBHOOK") && !strings.HasPrefix(kv, "GOFLAGS=") &&
			!strings.HasPrefix(kv, "GOPROXY=") && !strings.HasPrefix(kv, "GOWORK=") {
			env = append(env, kv)
		}
	}

	ran := 0
	for _, file := range files {
		dir := t.TempDir()
		if err := os.Symlink(e.bin, filepath.Join(dir, "webhookd")); err != nil {
			t.Fatal(err)
		}
		if file == "docs/receiver.md" {
			docsEndpointModule(t, root, dir)
		}
		ran += runDocsSession(t, dir, env, runs[file], rewrite)
	}
	t.Logf("%d shell blocks ran to the end, %d skipped", ran, skipped)
}

// docsShellBlocks returns the ```sh blocks of README.md and docs/*.md, page
// by page in that order.
func docsShellBlocks(t *testing.T, root string) []docsBlock {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pages)
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	var blocks []docsBlock
	for _, page := range pages {
		rel, _ := filepath.Rel(root, page)
		f, err := os.Open(page)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		var cur *docsBlock
		inFence := false
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case cur != nil && strings.HasPrefix(line, "```"):
				blocks = append(blocks, *cur)
				cur, inFence = nil, false
			case cur != nil:
				cur.text += line + "\n"
			case strings.HasPrefix(line, "```"):
				if !inFence && strings.TrimSpace(line) == "```sh" {
					cur = &docsBlock{file: rel, line: n}
				} else {
					inFence = !inFence
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if cur != nil {
			t.Fatalf("%s:%d: a ```sh block is never closed", rel, cur.line)
		}
	}
	if len(blocks) == 0 {
		t.Fatal("no ```sh block in README.md and docs/*.md")
	}
	return blocks
}

// docsEndpointModule makes dir what docs/receiver.md's local run expects:
// a Go module whose main.go is the page's complete endpoint, requiring
// github.com/webhookd/webhookd (this checkout, in place of `go get`). The
// endpoint's Redis, 127.0.0.1:6379 on the page, is a private one here.
func docsEndpointModule(t *testing.T, root, dir string) {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(root, "docs", "receiver.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), "## A complete endpoint\n\n```go\n")
	src, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		t.Fatal("docs/receiver.md has no Go block under \"A complete endpoint\"")
	}
	const pageRedis = `"127.0.0.1:6379"`
	if !strings.Contains(src, pageRedis) {
		t.Fatalf("docs/receiver.md's endpoint no longer names Redis at %s: update this test", pageRedis)
	}
	src = strings.ReplaceAll(src, pageRedis, `"`+docsPrivateRedis(t)+`"`)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	// webhookd's own requirements, so that every version is one this
	// checkout builds with and go.sum already has.
	gomod := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(mod), "module example.com/endpoint") +
		"\nrequire github.com/webhookd/webhookd v0.0.0\n\nreplace github.com/webhookd/webhookd => " + root + "\n"
	for name, data := range map[string]string{"go.mod": gomod, "go.sum": string(sum), "main.go": src + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// docsPrivateRedis starts a redis-server on a free TCP port of 127.0.0.1
// for the test's duration and returns its address.
func docsPrivateRedis(t *testing.T) string {
	t.Helper()
	addr := storetest.FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", port,
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var err error
	if !eventually(30*time.Second, func() bool {
		var c net.Conn
		if c, err = net.Dial("tcp", addr); err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("redis-server on %s: %v", addr, err)
	}
	return addr
}

// runDocsSession runs one page's blocks in order in one bash session in
// dir, reports the block that fails with its output, and returns how many
// blocks ran to their end.
func runDocsSession(t *testing.T, dir string, env []string, blocks []docsBlock, rewrite *strings.Replacer) int {
	t.Helper()
	const marker = "@@docs-block@@"
	var script strings.Builder
	script.WriteString(`curl() { command curl --fail-with-body --show-error "$@"; }` + "\n")
	script.WriteString(`trap 'echo "[exit status $? from: $BASH_COMMAND]" >&2' ERR` + "\n")
	for i, b := range blocks {
		fmt.Fprintf(&script, "printf '\\n%s %d\\n'\n", marker, i)
		script.WriteString(rewrite.Replace(b.text))
	}
	fmt.Fprintf(&script, "printf '\\n%s end\\n'\n", marker)

	out, err := os.CreateTemp(t.TempDir(), "output")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script.String())
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that what a block leaves running in the
	// background (a listener, an endpoint) ends with the session.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	runErr := cmd.Run()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	if ctx.Err() != nil {
		runErr = fmt.Errorf("still running after 3 minutes: %w", runErr)
	}

	data, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	// The output of each block; a failure is that of the last one begun.
	parts := strings.Split(string(data), "\n"+marker+" ")
	last, ended := -1, false
	for _, p := range parts[1:] {
		id, output, _ := strings.Cut(p, "\n")
		if id == "end" {
			ended = true
			break
		}
		if _, err := fmt.Sscan(id, &last); err != nil || last < 0 || last >= len(blocks) {
			t.Fatalf("%s: bad block marker %q", blocks[0].file, id)
		}
		b := blocks[last]
		t.Logf("ran %s:%d %q:\n%s", b.file, b.line, b.firstLine(), output)
	}
	if runErr == nil && ended {
		return len(blocks)
	}
	if runErr == nil {
		runErr = errors.New("the session ended before its last block")
	}
	if last < 0 {
		t.Errorf("%s: the bash session failed before its first block: %v\n%s", blocks[0].file, runErr, data)
		return 0
	}
	b := blocks[last]
	_, output, _ := strings.Cut(parts[len(parts)-1], "\n")
	t.Errorf("%s:%d, the block beginning %q, fails: %v\n%s", b.file, b.line, b.firstLine(), runErr, output)
	return last
}
