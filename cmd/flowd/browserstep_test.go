package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"flowservice/internal/testwait"
)

// How the browser tests wait. A whole test takes minutes on a loaded
// machine, so no deadline covers it: each step (a page load, a form post
// and its redirect, a wait for an element) is bounded on its own by
// browserStep, far above what a step takes, so that only a hang fails, and
// the failure names the step and shows the page it stopped on.
const browserStep = testwait.Hang

// browserReport bounds reading the page for a failure's message: a browser
// that hangs still lets the test say which step it was at.
const browserReport = 30 * time.Second

// browserDo runs the actions of one step of a browser test and fails the
// test, naming the step and showing the page, when they fail or hang.
func browserDo(t testing.TB, ctx context.Context, p *proc, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	browserRun(t, ctx, p, what, chromedp.Steps(actions...))
}

// browserRun is browserDo for an action with a value (a field's text, a
// script's answer).
func browserRun[T any](t testing.TB, ctx context.Context, p *proc, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStep)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		if sctx.Err() != nil {
			err = fmt.Errorf("no answer within %s (a hang): %w", browserStep, err)
		}
		t.Fatalf("%s: %v\n%s", what, err, pageReport(ctx, p))
	}
	return v
}

// pageReport is what a failed step shows: the page's address and text, and
// flowd's log.
func pageReport(ctx context.Context, p *proc) string {
	rctx, cancel := context.WithTimeout(ctx, browserReport)
	defer cancel()
	loc, err := chromedp.Run(rctx, chromedp.Location())
	if err != nil {
		loc = fmt.Sprintf("(address unknown: %v)", err)
	}
	// Not chromedp.Text, which waits for a visible body: a page caught
	// between two documents has none.
	body, err := chromedp.Run(rctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : "(no body yet: " + document.readyState + ")"`))
	if err != nil {
		body = fmt.Sprintf("(text unknown: %v)", err)
	}
	stderr := ""
	if p != nil {
		stderr = p.stderr.String()
	}
	return fmt.Sprintf("the page at %s:\n%s\nflowd stderr:\n%s", loc, body, stderr)
}

// loads runs actions that load another page (a link's click, a form's
// submit, whose answer may redirect) and waits until that page has loaded,
// its style sheet and scripts too. What follows then acts on the new
// document: a wait for an element that the old page has as well (a count
// above a list, a table) no longer passes on the old page, nor does a
// read of it fail because its document went away under it ("Cannot find
// context with specified id"), nor is a layout measured before the style
// sheet applies.
func loads(actions ...chromedp.Action[chromedp.Void]) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		// The page's status is not judged here: a form refused with a 422
		// is a page too, whose content the test checks.
		if _, err := chromedp.RunResponse(ctx, actions...); err != nil {
			return fmt.Errorf("waiting for the next page to load: %w", err)
		}
		return nil
	})
}

// layoutSettles bounds how long a layout check waits for a page that has
// loaded at its width (laidOut) to hold: long against the frames a script
// takes to draw, so that only a page that stays wrong fails.
const layoutSettles = 30 * time.Second

// laidOut waits until the page has all it is drawn with: its style sheet
// and scripts (the document complete), its fonts, and the width set by
// chromedp.EmulateViewport (which reaches the page after the command
// answers). A layout read before that judges an unstyled page or the old
// width.
func laidOut(width int64) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](fmt.Sprintf(
		`document.readyState === "complete" && document.fonts.status === "loaded" && window.innerWidth === %d`, width),
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)) // bounded by the step
}

// settles waits until the script cond holds on the page, for at most
// layoutSettles (as chromedp.ErrPollingTimeout), so that the caller can
// say what is wrong with the page.
func settles(ctx context.Context, cond string) error {
	sctx, cancel := context.WithTimeout(ctx, browserStep)
	defer cancel()
	_, err := chromedp.Run(sctx, chromedp.Poll[chromedp.Void](cond,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(layoutSettles)))
	return err
}
