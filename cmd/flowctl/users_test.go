package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"flowservice/pkg/datadir"
)

// run runs flowctl with args on the data directory dir.
func runFlowctl(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot(strings.NewReader(""), &out, &errb)
	root.SetArgs(append([]string{"--data-dir", dir, "--url", "https://flows.example.com"}, args...))
	err := root.Execute()
	return out.String(), err
}

// TestUsersCommands: flowctl users invite prints a set-up link on the
// given address, list shows the person, remove takes them out.
func TestUsersCommands(t *testing.T) {
	dir := t.TempDir()
	d, err := datadir.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := runFlowctl(t, dir, "projects", "create", "acme"); err != nil {
		t.Fatal(err)
	}
	out, err := runFlowctl(t, dir, "users", "invite", "--project", "acme", "--email", "Ada@example.com", "--role", "editor")
	if err != nil || !strings.HasPrefix(out, "https://flows.example.com/ui/setup?token=fsu_") {
		t.Fatalf("invite: %q %v", out, err)
	}
	if _, err := runFlowctl(t, dir, "users", "invite", "--project", "acme", "--email", "b@example.com", "--role", "owner"); err == nil ||
		!strings.Contains(err.Error(), "allowed values are admin, editor, operator, viewer") {
		t.Fatalf("bad role: %v", err)
	}
	out, err = runFlowctl(t, dir, "users", "list", "--project", "acme")
	if err != nil || !strings.Contains(out, "ada@example.com") || !strings.Contains(out, "invited") {
		t.Fatalf("list: %q %v", out, err)
	}
	out, err = runFlowctl(t, dir, "users", "remove", "--project", "acme", "ada@example.com")
	if err != nil || !strings.HasPrefix(out, "removed usr_") {
		t.Fatalf("remove: %q %v", out, err)
	}
	out, err = runFlowctl(t, dir, "users", "list", "--project", "acme")
	if err != nil || strings.Contains(out, "ada@example.com") {
		t.Fatalf("list after remove: %q %v", out, err)
	}
}
