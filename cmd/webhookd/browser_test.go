package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's Chromium, which .ci/services.sh installs.
const chromiumPath = "/usr/bin/chromium"

// stepTimeout bounds one browser step, so that a missing text fails the
// test quickly with what the page showed instead of hanging.
const stepTimeout = 15 * time.Second

// browser is one headless Chromium for a whole test; each tab is a
// context of it.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// newBrowser starts headless Chromium with a fresh profile. A machine
// without Chromium fails the test: the browser tests never skip.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s is missing (%v): install Debian's chromium package, as .ci/services.sh does", chromiumPath, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		// One zone for the browser and the test, so that a time typed into
		// a form means the same instant to both.
		chromedp.Env("TZ=UTC"),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return &browser{t: t, ctx: ctx}
}

// tab is one browser tab and what its pages reported: uncaught script
// errors and Content-Security-Policy violations, which fail the test.
type tab struct {
	t        *testing.T
	ctx      context.Context
	mu       sync.Mutex
	problems []string
}

// newTab opens a tab with the given viewport width.
func (b *browser) newTab(width int64) *tab {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	tb := &tab{t: b.t, ctx: ctx}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Source == "security" || strings.Contains(m.Text, "Content Security Policy") {
				tb.report(m.String())
			}
		}
	}()
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		b.t.Fatalf("browser: enable the log: %v", err)
	}
	tb.run(chromedp.EmulateViewport(width, 900))
	return tb
}

func (tb *tab) report(problem string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.problems = append(tb.problems, problem)
}

// checkClean fails the test if a page of the tab threw or broke the
// Content-Security-Policy.
func (tb *tab) checkClean() {
	tb.t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, p := range tb.problems {
		tb.t.Errorf("browser: %s", p)
	}
}

// run runs browser actions within stepTimeout; a failure shows what the
// page said.
func (tb *tab) run(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := tb.try(actions...); err != nil {
		tb.t.Fatalf("browser: %v\npage text:\n%s", err, tb.text())
	}
}

func (tb *tab) try(actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// value runs one browser action that answers a value, within stepTimeout.
func value[T any](tb *tab, action chromedp.Action[T]) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		tb.t.Fatalf("browser: %v\npage text:\n%s", err, tb.text())
	}
	return v
}

// text is what a person sees on the page.
func (tb *tab) text() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	return s
}

// open loads a URL.
func (tb *tab) open(url string) {
	tb.t.Helper()
	tb.run(chromedp.Navigate(url))
}

// see waits until every text is visible on the page.
func (tb *tab) see(texts ...string) {
	tb.t.Helper()
	var page, missing string
	if !eventually(stepTimeout, func() bool {
		page, missing = tb.text(), ""
		for _, s := range texts {
			if !strings.Contains(page, s) {
				missing = s
				break
			}
		}
		return missing == ""
	}) {
		tb.t.Fatalf("browser: %q is not on the page; page text:\n%s", missing, page)
	}
}

// notSee checks that no text is visible now (call it after see has
// waited for the page to be drawn).
func (tb *tab) notSee(texts ...string) {
	tb.t.Helper()
	page := tb.text()
	for _, s := range texts {
		if strings.Contains(page, s) {
			tb.t.Errorf("browser: %q is on the page but should not be; page text:\n%s", s, page)
		}
	}
}

// clickable is the XPath of a button, link or disclosure whose text is
// label, within the element matching scope (an XPath; "" is the whole
// page).
func clickable(scope, label string) chromedp.Search {
	return chromedp.Search(fmt.Sprintf(`%s//*[self::button or self::a or self::summary][normalize-space()=%q]`, scope, label))
}

// click clicks the first visible button or link labelled label.
func (tb *tab) click(label string) {
	tb.t.Helper()
	tb.clickIn("", label)
}

// clickIn clicks the button or link labelled label inside scope, once it
// stands still: a click lands where the element is when it is sent, and
// an element that something drawn late above it moves would have the
// click land elsewhere, doing nothing (a person waits for a page to stop
// moving, as Playwright's "stable" check does).
func (tb *tab) clickIn(scope, label string) {
	tb.t.Helper()
	target := clickable(scope, label)
	// The page may redraw the element between finding and clicking it
	// (a list that reloads): then find it again.
	var err error
	var box, last string
	if !eventually(stepTimeout, func() bool {
		if box, last = tb.boxOf(string(target)), box; box == "" || box != last {
			err = fmt.Errorf("%s is not on the page, or it moved between two looks (%s, then %s)", target, last, box)
			return false
		}
		err = tb.try(chromedp.Click(target, chromedp.NodeVisible))
		return err == nil
	}) {
		tb.t.Fatalf("browser: click %q: %v\npage text:\n%s", label, err, tb.text())
	}
}

// boxOf is where the first element matching the XPath that a person can
// see is on the page ("left,top,width,height"), or "" when there is none.
func (tb *tab) boxOf(xpath string) string {
	tb.t.Helper()
	return eval[string](tb, `(() => {
		const r = document.evaluate(`+jsString(xpath)+`, document, null, XPathResult.ORDERED_NODE_SNAPSHOT_TYPE, null);
		for (let i = 0; i < r.snapshotLength; i++) {
			const el = r.snapshotItem(i);
			if (el.getClientRects().length === 0) continue;
			const b = el.getBoundingClientRect();
			return [b.left, b.top + window.scrollY, b.width, b.height].join(",");
		}
		return "";
	})()`)
}

// gone waits until the XPath matches nothing a person can see.
func (tb *tab) gone(xpath string) {
	tb.t.Helper()
	if !eventually(stepTimeout, func() bool { return !tb.present(xpath) }) {
		tb.t.Fatalf("browser: %s is still on the page; page text:\n%s", xpath, tb.text())
	}
}

// field is the XPath of the input, select or textarea inside the label
// whose text starts with label.
func field(label string) chromedp.Search {
	return chromedp.Search(fmt.Sprintf(`//label[starts-with(normalize-space(), %q)]//*[self::input or self::select or self::textarea]`, label))
}

// typeInto types text into the field labelled label, as a person would.
func (tb *tab) typeInto(label, text string) {
	tb.t.Helper()
	tb.run(chromedp.SendKeys(field(label), text, chromedp.NodeVisible))
}

// clearField empties the field labelled label, as selecting its text and
// deleting it would.
func (tb *tab) clearField(label string) {
	tb.t.Helper()
	eval[bool](tb, `(() => {
		const el = document.evaluate(`+jsString(string(field(label)))+`, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
		el.value = "";
		el.dispatchEvent(new Event("input", {bubbles: true}));
		return true;
	})()`)
}

// setField sets a field's value directly: date pickers and selects take
// no typing.
//
// One script finds the visible field and sets it in one turn of the
// page's event loop, as textOf reads: a node found earlier over the
// protocol may have been replaced by a redraw ("could not set value on
// node N", seen under CI load).
func (tb *tab) setField(label, value string) {
	tb.t.Helper()
	xpath := string(field(label))
	if !eventually(stepTimeout, func() bool {
		return eval[bool](tb, `(() => {
			const r = document.evaluate(`+jsString(xpath)+`, document, null, XPathResult.ORDERED_NODE_SNAPSHOT_TYPE, null);
			for (let i = 0; i < r.snapshotLength; i++) {
				const el = r.snapshotItem(i);
				if (el.getClientRects().length === 0) continue;
				el.value = `+jsString(value)+`;
				el.dispatchEvent(new Event("input", {bubbles: true}));
				el.dispatchEvent(new Event("change", {bubbles: true}));
				return true;
			}
			return false;
		})()`)
	}) {
		tb.t.Fatalf("browser: no field a person can see is labelled %q; page text:\n%s", label, tb.text())
	}
}

// textOf waits for an element matching an XPath that a person can see and
// answers its text. One script finds and reads it in one turn of the
// page's event loop: reading a node found earlier over the protocol can
// read it after a redraw replaced it, and answer nothing.
func (tb *tab) textOf(xpath string) string {
	tb.t.Helper()
	var s *string
	if !eventually(stepTimeout, func() bool {
		s = eval[*string](tb, `(() => {
			const r = document.evaluate(`+jsString(xpath)+`, document, null, XPathResult.ORDERED_NODE_SNAPSHOT_TYPE, null);
			for (let i = 0; i < r.snapshotLength; i++) {
				const el = r.snapshotItem(i);
				if (el.getClientRects().length > 0) return el.innerText;
			}
			return null;
		})()`)
		return s != nil
	}) {
		tb.t.Fatalf("browser: nothing a person can see matches %s; page text:\n%s", xpath, tb.text())
	}
	return strings.TrimSpace(*s)
}

// eval runs a script in the page, waits for the promise it may answer, and
// decodes its result.
func eval[T any](tb *tab, script string) T {
	tb.t.Helper()
	return value(tb, chromedp.Evaluate[T](script, chromedp.EvalAwaitPromise))
}

// until clicks the button labelled label inside scope (a "Refresh"
// button) until the XPath want matches a visible element. It clicks at most
// every refreshEvery: each click reloads and redraws the list, and a list
// redrawn at every look might never be seen whole.
func (tb *tab) until(scope, label, want string) {
	tb.t.Helper()
	const refreshEvery = 100 * time.Millisecond
	var clicked time.Time
	if !eventually(stepTimeout, func() bool {
		if tb.present(want) {
			return true
		}
		if time.Since(clicked) >= refreshEvery {
			_ = tb.try(chromedp.Click(clickable(scope, label), chromedp.NodeVisible))
			clicked = time.Now()
		}
		return false
	}) {
		tb.t.Fatalf("browser: nothing matches %s after refreshing; page text:\n%s", want, tb.text())
	}
}

// present reports whether the XPath matches an element a person can see.
func (tb *tab) present(xpath string) bool {
	tb.t.Helper()
	return tb.boxOf(xpath) != ""
}

// screenshot saves the whole page as dir/name.png when the
// WEBHOOKD_PORTAL_SCREENSHOTS directory is set (relative to the
// repository's root).
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	tb.saveScreenshot(name, chromedp.FullScreenshot(100)) // 100: PNG
}

// screenshotViewport saves the top of the page, for a page too long to
// show whole.
func (tb *tab) screenshotViewport(name string) {
	tb.t.Helper()
	tb.run(chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	tb.saveScreenshot(name, chromedp.CaptureScreenshot())
}

func (tb *tab) saveScreenshot(name string, capture chromedp.Action[[]byte]) {
	tb.t.Helper()
	dir := os.Getenv("WEBHOOKD_PORTAL_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", "..", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	// Let the page settle: its fonts are loaded, any animation is over,
	// and two frames are drawn (focus rings, the last layout).
	eval[bool](tb, `(async () => {
		await document.fonts.ready;
		await Promise.all(document.getAnimations().map(a => a.finished));
		await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
		return true;
	})()`)
	png := value(tb, capture)
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}
