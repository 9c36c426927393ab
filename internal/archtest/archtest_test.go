package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "flowservice"

// root is the module's top directory, two levels up from this package.
var root = filepath.Join("..", "..")

// packages maps each package directory (relative, slash-separated) to the
// imports of its non-test files.
func packages(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		dir := filepath.ToSlash(rel)
		if _, ok := pkgs[dir]; !ok {
			pkgs[dir] = nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !slices.Contains(pkgs[dir], p) {
				pkgs[dir] = append(pkgs[dir], p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func architecture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPackageTable: every package of the module is named in
// docs/architecture.md, as `dir` (a new package without its line fails).
func TestPackageTable(t *testing.T) {
	doc := architecture(t)
	for dir := range packages(t) {
		if dir == "." || strings.HasPrefix(dir, "examples") {
			continue
		}
		if !strings.Contains(doc, "`"+dir+"`") {
			t.Errorf("docs/architecture.md does not name the package `%s`: add it to the package table", dir)
		}
	}
}

// stdlib tells a standard library import: its first element has no dot.
func stdlib(p string) bool {
	return !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") && !strings.HasPrefix(p, module)
}

// TestDomainImports: the domain imports the standard library, the one
// rate limiter the page names and the flow language, nothing of HTTP
// frameworks, SQL drivers or AWS, and no other package of the module; the
// flow language imports the standard library alone.
func TestDomainImports(t *testing.T) {
	allowed := map[string][]string{
		"pkg/automation": {"golang.org/x/time/rate", module + "/pkg/flowdef"},
		"pkg/flowdef":    nil,
	}
	pkgs := packages(t)
	for dir, ok := range allowed {
		imps, found := pkgs[dir]
		if !found {
			t.Errorf("%s is gone: update this test and docs/architecture.md", dir)
		}
		for _, p := range imps {
			if !stdlib(p) && !slices.Contains(ok, p) {
				t.Errorf("%s imports %s; docs/architecture.md says it imports only the standard library and %v", dir, p, ok)
			}
		}
	}
}

// adapters are the packages that implement the domain's ports. Each may
// import the domain and the small shared libraries, never another adapter.
var adapters = []string{
	"pkg/engine", "pkg/sandbox", "pkg/sqlitestore", "pkg/sealedsecrets", "pkg/cronscheduler",
	"pkg/dynamostore", "pkg/sqsqueue", "pkg/smsecrets", "pkg/ebscheduler", "pkg/s3payloads",
	"pkg/lambdacode", "pkg/emf", "pkg/awsenv", "pkg/tracing",
}

func TestAdaptersImportNoAdapter(t *testing.T) {
	pkgs := packages(t)
	for _, a := range adapters {
		imps, ok := pkgs[a]
		if !ok {
			t.Errorf("the adapter %s is gone: update this list and docs/architecture.md", a)
			continue
		}
		for _, p := range imps {
			if other := strings.TrimPrefix(p, module+"/"); other != p && other != a && slices.Contains(adapters, other) {
				t.Errorf("the adapter %s imports the adapter %s; adapters import the domain and shared libraries only", a, other)
			}
		}
	}
}

// TestDependencies: each module go.mod requires directly has its line in
// the Dependencies table (a module or a prefix of it, in backquotes).
func TestDependencies(t *testing.T) {
	doc := architecture(t)
	table := doc[strings.Index(doc, "## Dependencies"):]
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for _, line := range strings.Split(string(mod), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "require ("):
			in = true
			continue
		case line == ")":
			in = false
			continue
		case !in || strings.Contains(line, "// indirect") || line == "":
			continue
		}
		path := strings.Fields(line)[0]
		found := strings.Contains(table, "`"+path+"/") // a package of the module named
		for p := path; p != "." && p != ""; p = filepath.ToSlash(filepath.Dir(p)) {
			if strings.Contains(table, "`"+p+"`") {
				found = true
				break
			}
		}
		if !found && !strings.HasPrefix(path, module) {
			t.Errorf("go.mod requires %s, which the Dependencies table of docs/architecture.md does not justify", path)
		}
	}
}
