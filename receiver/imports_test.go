package receiver_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the packages merchants import small: receiver uses the
// standard library and package signer, whose verification it shares with
// webhookd's own checks (signer itself uses the standard library alone);
// redisdedup adds go-redis and pgdedup adds pgx; none uses another webhookd
// package. Test files may.
func TestImports(t *testing.T) {
	t.Parallel()
	const self, signer = "github.com/webhookd/webhookd/receiver", "github.com/webhookd/webhookd/signer"
	allowed := map[string][]string{
		".":          {signer},
		"../signer":  nil,
		"redisdedup": {self, signer, "github.com/redis/go-redis/v9"},
		"pgdedup":    {self, signer, "github.com/jackc/pgx/v5"},
	}
	for dir, extra := range allowed {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				first, _, _ := strings.Cut(path, "/")
				if !strings.Contains(first, ".") {
					continue // standard library
				}
				ok := false
				for _, p := range extra {
					ok = ok || path == p || strings.HasPrefix(path, p+"/")
				}
				if !ok {
					t.Errorf("%s imports %s", file, path)
				}
			}
		}
	}
	if _, err := os.Stat("redisdedup"); err != nil {
		t.Fatal(err)
	}
}
