package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// block is one shell block of the README walkthrough.
type block struct {
	code        string
	expectError bool // marked <!-- expect-error -->: every curl in it gets an error envelope
}

// walkthrough extracts the shell blocks between <!-- walkthrough --> and
// <!-- /walkthrough --> in the README.
func walkthrough(t *testing.T) []block {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	start, end := strings.Index(s, "<!-- walkthrough -->"), strings.Index(s, "<!-- /walkthrough -->")
	if start < 0 || end < start {
		t.Fatal("README has no <!-- walkthrough --> … <!-- /walkthrough --> section")
	}
	re := regexp.MustCompile("(?s)(<!-- expect-error -->\\s*)?```sh\n(.*?)```")
	var out []block
	for _, m := range re.FindAllStringSubmatch(s[start:end], -1) {
		out = append(out, block{code: m[2], expectError: m[1] != ""})
	}
	if len(out) < 5 {
		t.Fatalf("walkthrough has %d shell blocks; the section markers are probably off", len(out))
	}
	return out
}

// TestREADMEWalkthrough runs the README's curl walkthrough, in order, in one
// shell against a freshly started flowd, as a newcomer would.
func TestREADMEWalkthrough(t *testing.T) {
	work := t.TempDir()
	p := startFlowd(t, filepath.Join(work, ".flowd"))
	blocks := walkthrough(t)
	// The blocks run from the repository root: they read examples/.
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(examples, filepath.Join(work, "examples")); err != nil {
		t.Fatal(err)
	}

	// One script, so that variables carry from block to block; each block's
	// output goes to its own file. curl fails on HTTP errors except in the
	// blocks that show errors.
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for i, b := range blocks {
		code := strings.ReplaceAll(b.code, "http://127.0.0.1:8080", p.base)
		if !b.expectError {
			code = strings.ReplaceAll(code, "curl -sS", "curl -sS --fail-with-body")
		}
		fmt.Fprintf(&script, "{\n%s\n} > %s 2>&1\n", code, outFile(work, i))
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = work
	err = cmd.Run()
	for i, b := range blocks {
		out, _ := os.ReadFile(outFile(work, i))
		t.Logf("block %d:\n%s\n--- output:\n%s", i, b.code, out)
		if b.expectError {
			n := strings.Count(b.code, "curl ")
			if got := strings.Count(string(out), `"error":{"code":`); got != n {
				t.Errorf("block %d: %d error envelopes for %d curl calls", i, got, n)
			}
		} else if strings.Contains(string(out), `"error":`) {
			t.Errorf("block %d printed an error:\n%s", i, out)
		}
	}
	if err != nil {
		t.Fatalf("walkthrough failed: %v\nflowd stderr:\n%s", err, p.stderr)
	}
}

func outFile(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("block%02d.out", i)) }
