package httpapi

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The TypeScript tools, pinned. npm fetches them once into the user cache.
const (
	openapiTypeScript = "openapi-typescript@7.13.0"
	typeScript        = "typescript@5.9.3"
)

// TestTypeScriptTypesCompile generates TypeScript types from openapi.json
// with openapi-typescript, as a front-end team would, and compiles
// testdata/typescript/use.ts against them with tsc --strict. It needs node
// and npm, and npm must reach its registry (or its cache) the first time;
// without them the test is skipped, saying why.
func TestTypeScriptTypesCompile(t *testing.T) {
	t.Parallel() // its own directory; mostly node, which overlaps the other parallel tests
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: the TypeScript check needs node and npm")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no user cache directory for the npm tools: %v", err)
	}
	tools := filepath.Join(cache, "flowservice-typescript")
	bin := filepath.Join(tools, "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(tools, "node_modules", "openapi-typescript")); err != nil {
		if err := os.MkdirAll(tools, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tools, "package.json"), []byte(`{"name":"flowservice-typescript","private":true}`), 0o644); err != nil {
			t.Fatal(err)
		}
		install := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefer-offline", openapiTypeScript, typeScript)
		install.Dir = tools
		if out, err := install.CombinedOutput(); err != nil {
			t.Skipf("npm could not install %s and %s (offline?): %v\n%s", openapiTypeScript, typeScript, err, out)
		}
	}

	dir := t.TempDir()
	gen := exec.Command(filepath.Join(bin, "openapi-typescript"), "openapi.json", "-o", filepath.Join(dir, "api.d.ts"))
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("openapi-typescript refused openapi.json: %v\n%s", err, out)
	}
	use, err := os.ReadFile(filepath.Join("testdata", "typescript", "use.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "use.ts"), use, 0o644); err != nil {
		t.Fatal(err)
	}
	tsc := exec.Command(filepath.Join(bin, "tsc"), "--strict", "--noEmit", "use.ts", "api.d.ts")
	tsc.Dir = dir
	if out, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("the generated types do not compile under tsc --strict: %v\n%s", err, out)
	}
}
