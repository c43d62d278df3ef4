package transform_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/transform"
)

func TestCache(t *testing.T) {
	s := sandbox(t, testLimits)
	ctx := context.Background()
	sub, other := uuid.New(), uuid.New()
	ok := "function handler(w) { return w }"
	broken := "function handler(w) {"
	c := transform.NewCache(s, 2, 0)

	p1, err := c.Program(ctx, transform.Key{Subscription: sub, Version: 1}, codeOf(ok))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := c.Program(ctx, transform.Key{Subscription: sub, Version: 1}, codeOf("not compiled again: the version is the same"))
	if again != p1 {
		t.Fatal("the same version was compiled again")
	}
	_, err = c.Program(ctx, transform.Key{Subscription: sub, Version: 2}, codeOf(broken))
	var te *transform.Error
	if !errors.As(err, &te) || te.Kind != transform.KindSyntax {
		t.Fatalf("a new version was not compiled: %v", err)
	}
	if _, again := c.Program(ctx, transform.Key{Subscription: sub, Version: 2}, codeOf(ok)); !errors.Is(again, err) {
		t.Fatalf("a code that does not compile was not kept: %v", again)
	}
	if c.Len() != 1 {
		t.Fatalf("%d entries for one subscription", c.Len())
	}
	if _, err := c.Program(ctx, transform.Key{Subscription: other, Version: 1}, codeOf(ok)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Program(ctx, transform.Key{Subscription: uuid.New(), Version: 1}, codeOf(ok)); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 2 {
		t.Fatalf("%d entries past a bound of 2", c.Len())
	}

	byBytes := transform.NewCache(s, 0, p1.Size()+1)
	for range 3 {
		if _, err := byBytes.Program(ctx, transform.Key{Subscription: uuid.New(), Version: 1}, codeOf(ok)); err != nil {
			t.Fatal(err)
		}
	}
	if byBytes.Len() != 1 {
		t.Fatalf("%d entries past a bound of one program's bytes", byBytes.Len())
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	loop := transform.Key{Subscription: uuid.New(), Version: 1}
	if _, err := c.Program(cancelled, loop, codeOf("for (;;) {}")); err == nil || errors.As(err, &te) {
		t.Fatalf("cancelled compile: %v", err)
	}
	if _, err := c.Program(ctx, loop, codeOf(ok)); err != nil {
		t.Fatalf("webhookd's own failure was kept: %v", err)
	}
}

// codeOf is a code source that reads text.
func codeOf(text string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return text, nil }
}
