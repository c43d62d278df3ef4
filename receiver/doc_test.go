package receiver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocExampleCompiles type-checks the Go programs of docs/receiver.md,
// the first Go block under each heading listed, so that the page's examples
// keep up with the API.
func TestDocExampleCompiles(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../docs/receiver.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, heading := range []string{
		"## A complete endpoint\n",
		"## Ed25519 signatures (`v1a`)\n",
	} {
		t.Run(strings.TrimSpace(heading), func(t *testing.T) {
			t.Parallel()
			_, section, ok := strings.Cut(string(page), heading)
			_, rest, ok2 := strings.Cut(section, "```go\n")
			src, _, ok3 := strings.Cut(rest, "\n```\n")
			if !ok || !ok2 || !ok3 || !strings.HasPrefix(src, "package main") {
				t.Fatalf("docs/receiver.md has no Go program under %q", heading)
			}
			// Inside the module, so that its imports resolve to this code.
			dir, err := os.MkdirTemp(".", "docexample")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("go", "vet", "./"+filepath.Base(dir)).CombinedOutput()
			if err != nil {
				t.Fatalf("the example of docs/receiver.md does not compile: %v\n%s", err, out)
			}
		})
	}
}
