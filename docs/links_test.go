package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// markdownLink is an inline link or image of a page: [text](target) or
// ![alt](target), the target up to a space (a title) or the closing
// parenthesis.
var markdownLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// markdownHeading is a heading line; its anchor is GitHub's: lowercase,
// punctuation dropped, spaces as hyphens.
var markdownHeading = regexp.MustCompile("(?m)^#{1,6} +(.+?) *#*$")

// markdownReference is a reference link's definition, [label]: target,
// at the start of a line.
var markdownReference = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+)>?`)

// TestDocsLinksResolve: every relative link of README.md, docs/*.md and
// the repository's other pages (BENCHMARKS.md, a package's README), inline
// or by reference, names a file or folder of the repository, and an
// anchor names a heading of the page it points at; the README links only
// inside the repository. A page moved or a heading reworded breaks the
// test, not a reader's click.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pages := markdownPages(t, root)
	for _, want := range []string{"README.md", "docs/development.md"} {
		if !slices.Contains(pages, filepath.Join(root, want)) {
			t.Fatalf("%s is not among the pages found under %s", want, root)
		}
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		text := inlineCode.ReplaceAllString(withoutFences(string(b)), "``")
		var targets []string
		for _, m := range markdownLink.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range markdownReference.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				if rel == "README.md" && !strings.HasPrefix(target, "https://docs.webhookd.dev") {
					t.Errorf("%s links outside the repository: %s", rel, target)
				}
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := page
			if file != "" {
				resolved = filepath.Join(filepath.Dir(page), file)
				if !strings.HasPrefix(resolved, root+string(filepath.Separator)) {
					t.Errorf("%s links outside the repository: %s", rel, target)
					continue
				}
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s links to %s, which does not exist", rel, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(resolved, ".md") && !hasAnchor(t, resolved, anchor) {
				t.Errorf("%s links to %s: no heading has that anchor", rel, target)
			}
		}
	}
}

// markdownPages are the repository's Markdown pages, its hidden folders
// and node_modules left out.
func markdownPages(t *testing.T, root string) []string {
	t.Helper()
	var pages []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			pages = append(pages, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// withoutFences is a page with its fenced code blocks blanked, where
// brackets, parentheses and # are code, not links nor headings.
func withoutFences(s string) string {
	var out strings.Builder
	fenced := false
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			out.WriteString("\n")
			continue
		}
		if fenced {
			out.WriteString("\n")
			continue
		}
		out.WriteString(line)
	}
	return out.String()
}

// inlineCode is a span of inline code, where brackets are code too.
var inlineCode = regexp.MustCompile("`[^`]*`")

// hasAnchor says whether a heading of page has anchor as GitHub makes it.
func hasAnchor(t *testing.T, page, anchor string) bool {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range markdownHeading.FindAllStringSubmatch(withoutFences(string(b)), -1) {
		if headingAnchor(m[1]) == anchor {
			return true
		}
	}
	return false
}

// headingLink is a link inside a heading; its text stays in the anchor.
var headingLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// headingAnchor is GitHub's anchor of a heading's text: lowercase,
// letters, digits, spaces, hyphens and underscores kept, spaces as
// hyphens, inline code marks and links' targets dropped.
func headingAnchor(heading string) string {
	heading = headingLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
