package receiver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocExampleCompiles type-checks the complete endpoint of
// docs/receiver.md, so that the page's main example keeps up with the API.
func TestDocExampleCompiles(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../docs/receiver.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), "## A complete endpoint\n\n```go\n")
	src, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 || !strings.HasPrefix(src, "package main") {
		t.Fatal("docs/receiver.md has no Go block under \"A complete endpoint\"")
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
}
