package filter

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestCacheCompilesOncePerVersion: the same subscription and version
// gives the same program; a new version compiles the new text; a broken
// expression keeps returning its error.
func TestCacheCompilesOncePerVersion(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	cache := NewCache(c)
	id := uuid.New()
	v1 := time.Now()
	p1, err := cache.Program(id, v1, `type == "a"`)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := cache.Program(id, v1, `ignored: the version has not changed`)
	if again != p1 {
		t.Fatal("same version compiled again")
	}
	p2, err := cache.Program(id, v1.Add(time.Second), `type == "b"`)
	if err != nil || p2 == p1 {
		t.Fatalf("new version not compiled: %v", err)
	}
	e := event(t, `{}`)
	if ok, _ := p2.Match(e); ok {
		t.Fatal("new version's program matched payout.paid")
	}
	if _, err := cache.Program(uuid.New(), v1, `(`); err == nil {
		t.Fatal("broken expression compiled")
	}
}
