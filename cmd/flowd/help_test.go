package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// settingName is the shape of a flowd setting.
var settingName = regexp.MustCompile(`^FLOWD_[A-Z0-9_]+$`)

// settingsRead returns every FLOWD_ setting flowd reads: the names
// loadConfig asks its getenv for (with every value unset, so each default
// path runs, the run policy's prefixed names included), and every FLOWD_
// name written as a string in the package's other files (the aws backend,
// pprof).
func settingsRead(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	if _, err := loadConfig(func(k string) string { seen[k] = true; return "" }); err != nil {
		t.Fatalf("loadConfig with nothing set: %v", err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		// Files of the flowdtest tag are in the tests' flowd only.
		if strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, "_flowdtest.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && settingName.MatchString(s) {
					seen[s] = true
				}
			}
			return true
		})
	}
	var out []string
	for k := range seen {
		if settingName.MatchString(k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	if len(out) < 20 {
		t.Fatalf("found only %d settings (%v): the scan is broken", len(out), out)
	}
	return out
}

// TestHelpListsEverySetting: flowd --help names every FLOWD_ setting the code
// reads, and no setting it does not; docs/operations.md's table does too.
func TestHelpListsEverySetting(t *testing.T) {
	read := settingsRead(t)
	var help strings.Builder
	if done, err := commandLine([]string{"--help"}, &help, systemMemory(os.Getenv)); !done || err != nil {
		t.Fatalf("--help: done=%v err=%v", done, err)
	}
	inHelp := map[string]bool{}
	for _, w := range regexp.MustCompile(`FLOWD_[A-Z0-9_]+`).FindAllString(help.String(), -1) {
		inHelp[w] = true
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range read {
		if !inHelp[k] {
			t.Errorf("flowd reads %s, but flowd --help does not list it", k)
		}
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("flowd reads %s, but docs/operations.md does not list it", k)
		}
	}
	for k := range inHelp {
		if !slices.Contains(read, k) {
			t.Errorf("flowd --help lists %s, which flowd does not read", k)
		}
	}
}
