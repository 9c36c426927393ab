package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	// The generated client imports the runtime; importing it here keeps
	// it, at a version that builds the generated code, in go.mod.
	_ "github.com/oapi-codegen/runtime"
)

// TestGeneratedGoClient generates a Go client from openapi.json with
// oapi-codegen, at the version go.mod pins as a tool, as a user of the API
// would, then builds it with testdata/genclient's round trip and runs that
// against a started flowd: the document must be one a real generator
// accepts, and what it generates must speak to the real server.
func TestGeneratedGoClient(t *testing.T) {
	t.Parallel() // its own flowd, directory and ports; mostly a build
	dir := t.TempDir()
	gen := exec.Command("go", "tool", "oapi-codegen", "-generate", "types,client", "-package", "main",
		"-o", filepath.Join(dir, "client.gen.go"), filepath.Join("..", "..", "pkg", "httpapi", "openapi.json"))
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen refused openapi.json: %v\n%s", err, out)
	}
	src, err := os.ReadFile(filepath.Join("testdata", "genclient", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "genclient")
	// Built as files from this module's directory, so that the generated
	// code's runtime import resolves through go.mod.
	build := exec.Command("go", "build", "-o", bin, filepath.Join(dir, "client.gen.go"), filepath.Join(dir, "main.go"))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the generated client does not build: %v\n%s", err, out)
	}

	data := filepath.Join(t.TempDir(), ".flowd")
	p := startFlowd(t, data)
	out, err := exec.Command(bin, p.base, initialKey(t, data)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "round trip ok") {
		t.Fatalf("round trip through the generated client: %v\n%s\nflowd stderr:\n%s", err, out, p.stderr)
	}
}
