package smsecrets

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
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

	// The secret is named as documented, so IAM can scope by prefix.
	out, err := client.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(s.prefix + "/prj_a/connections/con_1")})
	if err != nil || aws.ToString(out.Name) != s.prefix+"/prj_a/connections/con_1" {
		t.Errorf("DescribeSecret by the documented name = %v, %v", out, err)
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

// stub is an API whose methods are function fields, to inject failures.
type stub struct {
	create func(*secretsmanager.CreateSecretInput) error
	put    func(*secretsmanager.PutSecretValueInput) error
	get    func(*secretsmanager.GetSecretValueInput) (*secretsmanager.GetSecretValueOutput, error)
	del    func(*secretsmanager.DeleteSecretInput) error
}

func (s *stub) CreateSecret(_ context.Context, in *secretsmanager.CreateSecretInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.CreateSecretOutput, error) {
	return &secretsmanager.CreateSecretOutput{}, s.create(in)
}

func (s *stub) PutSecretValue(_ context.Context, in *secretsmanager.PutSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error) {
	return &secretsmanager.PutSecretValueOutput{}, s.put(in)
}

func (s *stub) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	return s.get(in)
}

func (s *stub) DeleteSecret(_ context.Context, in *secretsmanager.DeleteSecretInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.DeleteSecretOutput, error) {
	return &secretsmanager.DeleteSecretOutput{}, s.del(in)
}

var (
	errExists   = &types.ResourceExistsException{Message: aws.String("the secret already exists")}
	errMissing  = &types.ResourceNotFoundException{Message: aws.String("Secrets Manager can't find the specified secret.")}
	errDeleting = &types.InvalidRequestException{Message: aws.String("You can't create this secret because a secret with this name is already scheduled for deletion.")}
	errBoom     = errors.New("boom")
)

func TestPutRetries(t *testing.T) {
	tests := []struct {
		name            string
		creates, puts   []error // answers in order; the last repeats
		wantCreates     int
		wantPuts        int
		wantErrContains string
	}{
		{name: "new", creates: []error{nil}, wantCreates: 1},
		{name: "exists", creates: []error{errExists}, puts: []error{nil}, wantCreates: 1, wantPuts: 1},
		{name: "name still being deleted", creates: []error{errDeleting, errDeleting, nil}, wantCreates: 3},
		{name: "deleted between create and update", creates: []error{errExists, nil}, puts: []error{errMissing}, wantCreates: 2, wantPuts: 1},
		{name: "gives up", creates: []error{errDeleting}, wantCreates: putAttempts, wantErrContains: "gave up"},
		{name: "create fails", creates: []error{errBoom}, wantCreates: 1, wantErrContains: "smsecrets: put secret flow/dev/prj_a/flows/flw_1: boom"},
		{name: "update fails", creates: []error{errExists}, puts: []error{errBoom}, wantCreates: 1, wantPuts: 1, wantErrContains: "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var creates, puts int
			next := func(errs []error, n int) error {
				if n >= len(errs) {
					return errs[len(errs)-1]
				}
				return errs[n]
			}
			st := &stub{
				create: func(in *secretsmanager.CreateSecretInput) error {
					if aws.ToString(in.Name) != "flow/dev/prj_a/flows/flw_1" || string(in.SecretBinary) != "v" {
						t.Errorf("CreateSecret(%s, %q)", aws.ToString(in.Name), in.SecretBinary)
					}
					creates++
					return next(tt.creates, creates-1)
				},
				put: func(in *secretsmanager.PutSecretValueInput) error {
					puts++
					return next(tt.puts, puts-1)
				},
			}
			s := New(st, "flow/dev/")
			s.pause = func(context.Context, int) error { return nil }
			err := s.PutSecret(context.Background(), "prj_a", "flows/flw_1", []byte("v"))
			if tt.wantErrContains == "" && err != nil || tt.wantErrContains != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErrContains)) {
				t.Errorf("err = %v, want %q", err, tt.wantErrContains)
			}
			if creates != tt.wantCreates || puts != tt.wantPuts {
				t.Errorf("%d creates, %d puts; want %d, %d", creates, puts, tt.wantCreates, tt.wantPuts)
			}
		})
	}
}

func TestGetAndDeleteMapping(t *testing.T) {
	st := &stub{
		get: func(*secretsmanager.GetSecretValueInput) (*secretsmanager.GetSecretValueOutput, error) {
			return nil, errDeleting
		},
		del: func(in *secretsmanager.DeleteSecretInput) error {
			if !aws.ToBool(in.ForceDeleteWithoutRecovery) {
				t.Errorf("DeleteSecret without ForceDeleteWithoutRecovery: the credential could be restored")
			}
			return errMissing
		},
	}
	s := New(st, "flow/dev")
	_, err := s.Secret(context.Background(), "prj_a", "x")
	wantNotFound(t, err)
	if err := s.DeleteSecret(context.Background(), "prj_a", "x"); err != nil {
		t.Errorf("delete missing = %v", err)
	}
	st.get = func(*secretsmanager.GetSecretValueInput) (*secretsmanager.GetSecretValueOutput, error) {
		return nil, errBoom
	}
	st.del = func(*secretsmanager.DeleteSecretInput) error { return errBoom }
	if _, err := s.Secret(context.Background(), "prj_a", "x"); !errors.Is(err, errBoom) || automation.IsNotFound(err) ||
		!strings.HasPrefix(err.Error(), "smsecrets: get secret flow/dev/prj_a/x: ") {
		t.Errorf("get failure = %v", err)
	}
	if err := s.DeleteSecret(context.Background(), "prj_a", "x"); !errors.Is(err, errBoom) {
		t.Errorf("delete failure = %v", err)
	}
	st.get = func(*secretsmanager.GetSecretValueInput) (*secretsmanager.GetSecretValueOutput, error) {
		return &secretsmanager.GetSecretValueOutput{SecretString: aws.String("set in the console")}, nil
	}
	if v, err := s.Secret(context.Background(), "prj_a", "x"); err != nil || string(v) != "set in the console" {
		t.Errorf("string secret = %q, %v", v, err)
	}
}
