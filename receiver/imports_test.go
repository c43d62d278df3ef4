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

// TestImports keeps the packages merchants import small, and the
// verification rules in one place: receiver uses the standard library
// alone; signer, which signs by receiver's rules and encrypts by
// receiver/jwe's, adds receiver, go-jose and internal/keybounds (the one
// rule of key sizes, standard library alone) and nothing else (so
// receiver can never import it back); redisdedup adds go-redis, pgdedup adds pgx and
// jwe adds go-jose. Test files may import more.
func TestImports(t *testing.T) {
	t.Parallel()
	const self = "github.com/webhookd/webhookd/receiver"
	allowed := map[string][]string{
		".":          nil,
		"../signer":  {self, "github.com/go-jose/go-jose/v4", "github.com/webhookd/webhookd/internal/keybounds"},
		"redisdedup": {self, "github.com/redis/go-redis/v9"},
		"pgdedup":    {self, "github.com/jackc/pgx/v5"},
		"jwe":        {self, "github.com/go-jose/go-jose/v4"},
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
