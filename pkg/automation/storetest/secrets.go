package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"flowservice/pkg/automation"
)

// RunSecrets runs the Secrets contract against the adapter open makes. open
// must return an empty store each call and arrange its own cleanup.
func RunSecrets(t *testing.T, open func(t *testing.T) automation.Secrets) {
	t.Run("PutGetOverwriteDelete", func(t *testing.T) { testSecretLifecycle(t, open(t)) })
	t.Run("ProjectIsolation", func(t *testing.T) { testSecretIsolation(t, open(t)) })
}

func wantSecret(t *testing.T, s automation.Secrets, project, name string, want []byte) {
	t.Helper()
	got, err := s.Secret(context.Background(), project, name)
	if err != nil {
		t.Fatalf("Secret(%s, %s): %v", project, name, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Secret(%s, %s) = %q, want %q", project, name, got, want)
	}
}

func wantNoSecret(t *testing.T, s automation.Secrets, project, name string) {
	t.Helper()
	_, err := s.Secret(context.Background(), project, name)
	wantErrIs(t, "Secret("+project+", "+name+")", err, automation.ErrNotFound)
}

// wantErrIs is wantKind for adapters whose errors need not be
// *automation.Error: the Service only tests ErrNotFound on secrets.
func wantErrIs(t *testing.T, what string, err, kind error) {
	t.Helper()
	if err == nil || !errors.Is(err, kind) {
		t.Fatalf("%s: err = %v, want an error wrapping %v", what, err, kind)
	}
}

func testSecretLifecycle(t *testing.T, s automation.Secrets) {
	ctx := context.Background()
	p := automation.NewID(automation.PrefixProject)
	name := automation.ConnectionSecretName(automation.NewID(automation.PrefixConnection))

	wantNoSecret(t, s, p, name)

	v1 := []byte(`{"apiKey":"sk_live_first"}`)
	must(t, "PutSecret", s.PutSecret(ctx, p, name, v1))
	wantSecret(t, s, p, name, v1)

	// Values are bytes, not text.
	v2 := append([]byte{0, 1, 2, 0xff, '\n'}, bytes.Repeat([]byte("second value "), 300)...)
	must(t, "PutSecret overwrite", s.PutSecret(ctx, p, name, v2))
	wantSecret(t, s, p, name, v2)

	other := automation.FlowSecretName(automation.NewID(automation.PrefixFlow))
	v3 := []byte(`{"trigger.webhook.authentication.value":"hunter2"}`)
	must(t, "PutSecret other", s.PutSecret(ctx, p, other, v3))

	must(t, "DeleteSecret", s.DeleteSecret(ctx, p, name))
	wantNoSecret(t, s, p, name)
	wantSecret(t, s, p, other, v3)
	must(t, "DeleteSecret of a deleted secret", s.DeleteSecret(ctx, p, name))
	must(t, "DeleteSecret of an unknown secret", s.DeleteSecret(ctx, p, "connections/con_never"))

	// A deleted name can be used again.
	must(t, "PutSecret after delete", s.PutSecret(ctx, p, name, v1))
	wantSecret(t, s, p, name, v1)
}

func testSecretIsolation(t *testing.T, s automation.Secrets) {
	ctx := context.Background()
	p1, p2 := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)
	name := automation.ConnectionSecretName(automation.NewID(automation.PrefixConnection))

	must(t, "PutSecret p1", s.PutSecret(ctx, p1, name, []byte("one")))
	wantNoSecret(t, s, p2, name)

	must(t, "PutSecret p2", s.PutSecret(ctx, p2, name, []byte("two")))
	wantSecret(t, s, p1, name, []byte("one"))
	wantSecret(t, s, p2, name, []byte("two"))

	must(t, "DeleteSecret p2", s.DeleteSecret(ctx, p2, name))
	wantNoSecret(t, s, p2, name)
	wantSecret(t, s, p1, name, []byte("one"))
}
