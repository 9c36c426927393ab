package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileName(t *testing.T) {
	for in, want := range map[string]string{
		"Deploy notifier": "Deploy notifier.flow.json",
		"a/b\\c:d":        "a_b_c_d.flow.json",
		"..":              "_.flow.json",
		"":                "_.flow.json",
		"émoji ✓":         "émoji ✓.flow.json",
	} {
		if got := fileName(in); got != want {
			t.Errorf("fileName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadFlowFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	doc := func(name string) string {
		return `{"apiVersion":"v1","kind":"Flow","name":"` + name + `","engine":"FLOW_BUILDER","definition":{"steps":[]}}`
	}
	write("a.flow.json", doc("A"))
	write("b.flow.json", doc("B"))
	write("notes.txt", "not a flow")
	files, err := readFlowFiles([]string{dir})
	if err != nil || len(files) != 2 || files[0].doc.Name != "A" || files[1].doc.Name != "B" {
		t.Fatalf("readFlowFiles(dir) = %v, %v", files, err)
	}
	for _, tt := range []struct{ name, body, want string }{
		{"dup.flow.json", doc("A"), `both define flow "A"`},
		{"kind.flow.json", strings.Replace(doc("C"), `"Flow"`, `"Connection"`, 1), "kind"},
		{"typo.flow.json", strings.Replace(doc("C"), `"engine"`, `"engin"`, 1), "engin"},
		{"noname.flow.json", doc(""), "no name"},
	} {
		p := write(tt.name, tt.body)
		if _, err := readFlowFiles([]string{dir}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
		os.Remove(p)
	}
	if _, err := readFlowFiles([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing path read without error")
	}
}
