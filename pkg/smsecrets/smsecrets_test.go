package smsecrets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"flowservice/pkg/automation"
	"flowservice/pkg/awstest"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

func newStore(t *testing.T) (*Store, *secretsmanager.Client) {
	client := secretsmanager.NewFromConfig(awstest.Start(t))
	return New(client, "flow/"+awstest.UniqueName(t, "test")), client
}

func TestSecretsOnMoto(t *testing.T) {
	s, client := newStore(t)
	ctx := t.Context()
	name := automation.ConnectionSecretName("con_1")
	v1 := []byte(`{"apiKey":"sk-live-1"}`)
	v2 := []byte{0, 0xff, 0xfe, 'x'} // opaque bytes, not even UTF-8

	_, err := s.Secret(ctx, "prj_a", name)
	wantNotFound(t, err)
	if err := s.DeleteSecret(ctx, "prj_a", name); err != nil {
		t.Errorf("deleting a missing secret: %v", err)
	}
	if err := s.PutSecret(ctx, "prj_a", name, v1); err != nil {
		t.Fatal(err)
	}
	wantValue(t, s, "prj_a", name, v1)
	if err := s.PutSecret(ctx, "prj_a", name, v2); err != nil {
		t.Fatal(err)
	}
	wantValue(t, s, "prj_a", name, v2)

	// Projects do not share names.
	_, err = s.Secret(ctx, "prj_b", name)
	wantNotFound(t, err)
	if err := s.PutSecret(ctx, "prj_b", name, v1); err != nil {
		t.Fatal(err)
	}
	wantValue(t, s, "prj_a", name, v2)

	// One secret per project, named as documented, so IAM can scope by
	// prefix; it is a JSON document of the project's values.
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(s.prefix + "/prj_a")})
	if err != nil || !strings.Contains(aws.ToString(out.SecretString), `"connections/con_1":`) {
		t.Errorf("GetSecretValue of the project's document = %v, %v", out, err)
	}
	if err := s.PutSecret(ctx, "prj_a", "variables/TOKEN", v1); err != nil {
		t.Fatal(err)
	}
	list, err := client.ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list.SecretList {
		if strings.HasPrefix(aws.ToString(e.Name), s.prefix+"/") {
			names = append(names, aws.ToString(e.Name))
		}
	}
	slices.Sort(names)
	if want := []string{s.prefix + "/prj_a", s.prefix + "/prj_b"}; !slices.Equal(names, want) {
		t.Errorf("secrets %v, want one per project %v", names, want)
	}

	if err := s.DeleteSecret(ctx, "prj_a", name); err != nil {
		t.Fatal(err)
	}
	_, err = s.Secret(ctx, "prj_a", name)
	wantNotFound(t, err)
	if err := s.DeleteSecret(ctx, "prj_a", name); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
	wantValue(t, s, "prj_b", name, v1)

	// A deleted name can be used again at once.
	if err := s.PutSecret(ctx, "prj_a", name, v1); err != nil {
		t.Fatalf("recreate after delete: %v", err)
	}
	wantValue(t, s, "prj_a", name, v1)

	if err := s.PutSecret(ctx, "prj_a", "empty", nil); err == nil {
		t.Errorf("PutSecret with an empty value succeeded")
	}
}

func wantValue(t *testing.T, s *Store, project, name string, want []byte) {
	t.Helper()
	got, err := s.Secret(t.Context(), project, name)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("Secret(%s, %s) = %q, %v; want %q", project, name, got, err, want)
	}
}

func wantNotFound(t *testing.T, err error) {
	t.Helper()
	var e *automation.Error
	if !errors.As(err, &e) || !errors.Is(err, automation.ErrNotFound) || e.Code != "SECRET_NOT_FOUND" {
		t.Errorf("err = %v, want SECRET_NOT_FOUND", err)
	}
}

// counting wraps the moto client, counting calls and letting a test act
// between them.
type counting struct {
	API
	mu    sync.Mutex
	calls map[string]int
	// beforePut, if set, runs before each PutSecretValue (the n-th, from 1).
	beforePut func(n int)
}

func (c *counting) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[op]++
	return c.calls[op]
}

func (c *counting) n(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

func (c *counting) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, o ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	c.count("get")
	return c.API.GetSecretValue(ctx, in, o...)
}

func (c *counting) PutSecretValue(ctx context.Context, in *secretsmanager.PutSecretValueInput, o ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error) {
	if n := c.count("put"); c.beforePut != nil {
		c.beforePut(n)
	}
	return c.API.PutSecretValue(ctx, in, o...)
}

func (c *counting) UpdateSecretVersionStage(ctx context.Context, in *secretsmanager.UpdateSecretVersionStageInput, o ...func(*secretsmanager.Options)) (*secretsmanager.UpdateSecretVersionStageOutput, error) {
	c.count("stage")
	return c.API.UpdateSecretVersionStage(ctx, in, o...)
}

// TestNoLostWrite makes two writers of one project's document meet, the
// same way every time: writer B's whole write lands between writer A's read
// and A's move of AWSCURRENT. A's move is refused, A reads again and writes
// its change onto B's document: both values are there.
func TestNoLostWrite(t *testing.T) {
	ctx := t.Context()
	raw, _ := newStore(t)
	if err := raw.PutSecret(ctx, "prj_a", "variables/FIRST", []byte("1")); err != nil {
		t.Fatal(err)
	}
	wa := &counting{API: raw.sm}
	a := New(wa, raw.prefix)
	b := New(raw.sm, raw.prefix)
	wa.beforePut = func(n int) {
		if n == 1 { // A has read the document; B writes now
			if err := b.PutSecret(ctx, "prj_a", "connections/con_b", []byte("from B")); err != nil {
				t.Errorf("writer B: %v", err)
			}
		}
	}
	if err := a.PutSecret(ctx, "prj_a", "connections/con_a", []byte("from A")); err != nil {
		t.Fatalf("writer A: %v", err)
	}
	for name, want := range map[string]string{"variables/FIRST": "1", "connections/con_a": "from A", "connections/con_b": "from B"} {
		wantValue(t, raw, "prj_a", name, []byte(want))
	}
	if wa.n("put") != 2 || wa.n("stage") != 2 {
		t.Errorf("writer A made %d puts and %d stage moves, want 2 each (the first refused)", wa.n("put"), wa.n("stage"))
	}

	// A delete meets a write the same way.
	wa.calls, wa.beforePut = nil, func(n int) {
		if n == 1 {
			if err := b.PutSecret(ctx, "prj_a", "variables/SECOND", []byte("2")); err != nil {
				t.Errorf("writer B: %v", err)
			}
		}
	}
	if err := a.DeleteSecret(ctx, "prj_a", "connections/con_a"); err != nil {
		t.Fatal(err)
	}
	_, err := raw.Secret(ctx, "prj_a", "connections/con_a")
	wantNotFound(t, err)
	wantValue(t, raw, "prj_a", "variables/SECOND", []byte("2"))
	wantValue(t, raw, "prj_a", "connections/con_b", []byte("from B"))
}

// TestConcurrentWriters has writers on one project at once, the first of
// them racing to create its document: every write lands.
func TestConcurrentWriters(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t)
	const writers = 6
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			errs <- s.PutSecret(ctx, "prj_c", fmt.Sprintf("variables/V%d", i), []byte(fmt.Sprint(i)))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a writer failed: %v", err)
		}
	}
	for i := range writers {
		wantValue(t, s, "prj_c", fmt.Sprintf("variables/V%d", i), []byte(fmt.Sprint(i)))
	}
}

// TestDocumentBound: a write that would take the project's document over
// Secrets Manager's 64 KB is a 403 QUOTA_EXCEEDED naming the bound, and
// what the project had stays.
func TestDocumentBound(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t)
	big := bytes.Repeat([]byte("k"), 25_000)
	for _, name := range []string{"connections/a", "connections/b"} {
		if err := s.PutSecret(ctx, "prj_q", name, big); err != nil {
			t.Fatal(err)
		}
	}
	err := s.PutSecret(ctx, "prj_q", "connections/c", big)
	var e *automation.Error
	if !errors.As(err, &e) || !errors.Is(err, automation.ErrForbidden) || e.Code != "QUOTA_EXCEEDED" || !strings.Contains(e.Message, "65536") {
		t.Fatalf("third 25 KB value: %v, want 403 QUOTA_EXCEEDED naming 65536", err)
	}
	wantValue(t, s, "prj_q", "connections/a", big)
	_, err = s.Secret(ctx, "prj_q", "connections/c")
	wantNotFound(t, err)
	// Replacing a value with one of the same size still fits.
	if err := s.PutSecret(ctx, "prj_q", "connections/b", bytes.Repeat([]byte("j"), 25_000)); err != nil {
		t.Errorf("replacing a value: %v", err)
	}
}

// TestMigrate moves the secrets of an earlier release (one per value) into
// the projects' documents: before, reads fall back to them and a delete
// removes them too; after, every value reads from the document, a value the
// document already had is kept, the earlier secrets are scheduled for
// deletion, and a missing name costs one read. A second run changes nothing.
func TestMigrate(t *testing.T) {
	ctx := t.Context()
	raw, client := newStore(t)
	old := func(name string, in *secretsmanager.CreateSecretInput) {
		in.Name = aws.String(raw.prefix + "/" + name)
		if _, err := client.CreateSecret(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	old("prj_m/connections/con_1", &secretsmanager.CreateSecretInput{SecretBinary: []byte{0, 1, 2}})
	old("prj_m/variables/A", &secretsmanager.CreateSecretInput{SecretBinary: []byte("old A")})
	old("prj_m/variables/GONE", &secretsmanager.CreateSecretInput{SecretBinary: []byte("revoke me")})
	old("prj_n/flows/flw_1", &secretsmanager.CreateSecretInput{SecretString: aws.String("set in the console")})
	c := &counting{API: client}
	s := New(c, raw.prefix)

	// Before the migration: the document wins, earlier secrets are read.
	if err := s.PutSecret(ctx, "prj_m", "variables/A", []byte("new A")); err != nil {
		t.Fatal(err)
	}
	wantValue(t, s, "prj_m", "variables/A", []byte("new A"))
	wantValue(t, s, "prj_m", "connections/con_1", []byte{0, 1, 2})
	wantValue(t, s, "prj_n", "flows/flw_1", []byte("set in the console"))
	if err := s.DeleteSecret(ctx, "prj_m", "variables/GONE"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Secret(ctx, "prj_m", "variables/GONE")
	wantNotFound(t, err)

	rep, err := s.Migrate(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if want := (MigrationReport{Projects: 2, Copied: 2, Kept: 1, Deleted: 3}); rep != want {
		t.Errorf("migration = %+v, want %+v", rep, want)
	}
	for _, name := range []string{"prj_m/connections/con_1", "prj_m/variables/A", "prj_n/flows/flw_1"} {
		d, err := client.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(raw.prefix + "/" + name)})
		if err != nil || d.DeletedDate == nil {
			t.Errorf("earlier secret %s: %v, %v; want scheduled for deletion", name, d, err)
		}
	}
	wantValue(t, s, "prj_m", "variables/A", []byte("new A"))
	wantValue(t, s, "prj_m", "connections/con_1", []byte{0, 1, 2})
	wantValue(t, s, "prj_n", "flows/flw_1", []byte("set in the console"))
	before := c.n("get")
	_, err = s.Secret(ctx, "prj_m", "variables/NONE")
	wantNotFound(t, err)
	if got := c.n("get") - before; got != 1 {
		t.Errorf("a missing name after the migration took %d reads, want 1", got)
	}

	rep, err = s.Migrate(ctx, client)
	if err != nil || rep != (MigrationReport{Projects: 2}) {
		t.Errorf("second migration = %+v, %v; want nothing copied or deleted", rep, err)
	}
}

// stub is an API whose methods are function fields, to inject failures.
type stub struct {
	API
	get   func(*secretsmanager.GetSecretValueInput) (*secretsmanager.GetSecretValueOutput, error)
	put   func(*secretsmanager.PutSecretValueInput) error
	stage func(*secretsmanager.UpdateSecretVersionStageInput) error
}

func (s *stub) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	return s.get(in)
}

func (s *stub) PutSecretValue(_ context.Context, in *secretsmanager.PutSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error) {
	return &secretsmanager.PutSecretValueOutput{VersionId: aws.String("v-new")}, s.put(in)
}

func (s *stub) UpdateSecretVersionStage(_ context.Context, in *secretsmanager.UpdateSecretVersionStageInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.UpdateSecretVersionStageOutput, error) {
	return &secretsmanager.UpdateSecretVersionStageOutput{}, s.stage(in)
}

var errBoom = errors.New("boom")

// TestWriteGivesUp: a writer that keeps losing the move of AWSCURRENT
// stops after updateAttempts with 409 CONFLICT; any other failure is not
// retried and keeps its cause.
func TestWriteGivesUp(t *testing.T) {
	var puts int
	st := &stub{
		get: func(*secretsmanager.GetSecretValueInput) (*secretsmanager.GetSecretValueOutput, error) {
			return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(`{"values":{}}`), VersionId: aws.String("v1")}, nil
		},
		put: func(in *secretsmanager.PutSecretValueInput) error {
			puts++
			if !slices.Equal(in.VersionStages, []string{pendingStage}) {
				t.Errorf("PutSecretValue with stages %v: the new version must not be current before the move", in.VersionStages)
			}
			return nil
		},
		stage: func(in *secretsmanager.UpdateSecretVersionStageInput) error {
			if aws.ToString(in.RemoveFromVersionId) != "v1" || aws.ToString(in.MoveToVersionId) != "v-new" {
				t.Errorf("move %s → %s, want v1 → v-new", aws.ToString(in.RemoveFromVersionId), aws.ToString(in.MoveToVersionId))
			}
			return &types.InvalidParameterException{Message: aws.String("Version stage AWSCURRENT not found in version v1")}
		},
	}
	s := New(st, "flow/dev")
	s.pause = func(context.Context, int) error { return nil }
	err := s.PutSecret(context.Background(), "prj_a", "x", []byte("v"))
	var e *automation.Error
	if !errors.As(err, &e) || !errors.Is(err, automation.ErrConflict) || e.Code != "CONFLICT" || puts != updateAttempts {
		t.Errorf("err = %v after %d puts; want 409 CONFLICT after %d", err, puts, updateAttempts)
	}

	puts = 0
	st.put = func(*secretsmanager.PutSecretValueInput) error { puts++; return errBoom }
	if err := s.PutSecret(context.Background(), "prj_a", "x", []byte("v")); !errors.Is(err, errBoom) || puts != 1 {
		t.Errorf("put failure = %v after %d puts; want boom, not retried", err, puts)
	}
	st.get = func(*secretsmanager.GetSecretValueInput) (*secretsmanager.GetSecretValueOutput, error) {
		return nil, errBoom
	}
	if _, err := s.Secret(context.Background(), "prj_a", "x"); !errors.Is(err, errBoom) || automation.IsNotFound(err) {
		t.Errorf("get failure = %v", err)
	}
	if err := s.PutSecret(context.Background(), "prj_a", "empty", nil); err == nil {
		t.Errorf("PutSecret with an empty value succeeded")
	}
}

// TestDocumentHolds: what the bound means for a project. 200 secret
// variables of 256 bytes (the most variables a project may have) fit in
// one document, text as text; binary values round-trip through base64.
func TestDocumentHolds(t *testing.T) {
	d := document{Values: map[string][]byte{}}
	for i := range 200 {
		d.Values[fmt.Sprintf("variables/SECRET_%03d", i)] = bytes.Repeat([]byte("a<&"), 86)[:256]
	}
	d.Values["connections/con_bin"] = []byte{0, 0xff, 0xfe}
	b, err := d.MarshalJSON()
	if err != nil || len(b) > MaxDocumentBytes {
		t.Fatalf("200 values of 256 bytes take %d bytes (%v), want at most %d", len(b), err, MaxDocumentBytes)
	}
	t.Logf("200 values of 256 bytes: %d bytes of %d", len(b), MaxDocumentBytes)
	var back document
	if err := json.Unmarshal(b, &back); err != nil || len(back.Values) != 201 ||
		!bytes.Equal(back.Values["connections/con_bin"], []byte{0, 0xff, 0xfe}) || !bytes.Equal(back.Values["variables/SECRET_007"], d.Values["variables/SECRET_007"]) {
		t.Errorf("round trip: %v, %d values", err, len(back.Values))
	}
}
