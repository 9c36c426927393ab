// Package smsecrets implements automation.Secrets on AWS Secrets Manager, for
// the service's AWS deployment: one secret per value, named
// <prefix>/<project>/<name>, so that IAM policies can scope a function to
// one stage's secrets (prefix/*) and CloudTrail names every access.
package smsecrets

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"flowservice/pkg/automation"
)

// API is the part of the Secrets Manager client the store uses.
// *secretsmanager.Client implements it; tests substitute a stub to inject
// failures.
type API interface {
	CreateSecret(ctx context.Context, in *secretsmanager.CreateSecretInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.CreateSecretOutput, error)
	PutSecretValue(ctx context.Context, in *secretsmanager.PutSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error)
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
	DeleteSecret(ctx context.Context, in *secretsmanager.DeleteSecretInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.DeleteSecretOutput, error)
}

var _ API = (*secretsmanager.Client)(nil)

// Store keeps secrets in Secrets Manager. It is safe for concurrent use.
type Store struct {
	sm     API
	prefix string
	// pause waits between attempts when a name is still being deleted.
	pause func(ctx context.Context, attempt int) error
}

var _ automation.Secrets = (*Store)(nil)

// New returns a Store whose secrets are named prefix/<project>/<name>; the
// prefix carries the stage, such as "flow/dev".
func New(client API, prefix string) *Store {
	return &Store{sm: client, prefix: strings.TrimSuffix(prefix, "/"), pause: backoff}
}

// putAttempts bounds Put's retries: a force-deleted name stays taken for a
// few seconds on AWS, and a concurrent delete can remove the secret between
// Put's create and its update.
const putAttempts = 6

// Name returns the Secrets Manager name of a project's secret.
func (s *Store) Name(project, name string) string {
	return s.prefix + "/" + project + "/" + name
}

// PutSecret creates the secret, or stores a new version of it if it exists.
func (s *Store) PutSecret(ctx context.Context, project, name string, value []byte) error {
	id := s.Name(project, name)
	if len(value) == 0 {
		// Secrets Manager refuses empty values; none of the service's
		// secrets is empty.
		return fmt.Errorf("smsecrets: put secret %s: empty value", id)
	}
	var err error
	for attempt := 0; attempt < putAttempts; attempt++ {
		if attempt > 0 {
			if err := s.pause(ctx, attempt); err != nil {
				return fmt.Errorf("smsecrets: put secret %s: %w", id, err)
			}
		}
		_, err = s.sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
			Name: aws.String(id), SecretBinary: value,
			Description: aws.String("flow service secret of project " + project),
			Tags:        []types.Tag{{Key: aws.String("project"), Value: aws.String(project)}},
		})
		var exists *types.ResourceExistsException
		switch {
		case err == nil:
			return nil
		case errors.As(err, &exists):
			_, err = s.sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
				SecretId: aws.String(id), SecretBinary: value,
			})
			if err == nil {
				return nil
			}
			if isNotFound(err) || isScheduledForDeletion(err) {
				continue // deleted meanwhile: create it again
			}
			return fmt.Errorf("smsecrets: put secret %s: %w", id, err)
		case isScheduledForDeletion(err):
			continue // the previous secret of this name is still going
		default:
			return fmt.Errorf("smsecrets: put secret %s: %w", id, err)
		}
	}
	return fmt.Errorf("smsecrets: put secret %s: gave up after %d attempts: %w", id, putAttempts, err)
}

// Secret returns the current value of a secret.
func (s *Store) Secret(ctx context.Context, project, name string) ([]byte, error) {
	id := s.Name(project, name)
	out, err := s.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
	if isNotFound(err) || isScheduledForDeletion(err) {
		return nil, automation.NotFound("secret", name)
	}
	if err != nil {
		return nil, fmt.Errorf("smsecrets: get secret %s: %w", id, err)
	}
	if out.SecretBinary != nil {
		return out.SecretBinary, nil
	}
	// A value set outside the service (console, CLI) is a string.
	if out.SecretString != nil {
		return []byte(*out.SecretString), nil
	}
	return nil, fmt.Errorf("smsecrets: get secret %s: no value", id)
}

// DeleteSecret deletes a secret at once, without the recovery window: a
// revoked credential must not be restorable by anyone.
func (s *Store) DeleteSecret(ctx context.Context, project, name string) error {
	id := s.Name(project, name)
	_, err := s.sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{
		SecretId: aws.String(id), ForceDeleteWithoutRecovery: aws.Bool(true),
	})
	if err == nil || isNotFound(err) || isScheduledForDeletion(err) {
		return nil
	}
	return fmt.Errorf("smsecrets: delete secret %s: %w", id, err)
}

func isNotFound(err error) bool {
	var nf *types.ResourceNotFoundException
	return errors.As(err, &nf)
}

// isScheduledForDeletion recognizes the InvalidRequestException Secrets
// Manager answers for a name whose secret is being deleted.
func isScheduledForDeletion(err error) bool {
	var ir *types.InvalidRequestException
	return errors.As(err, &ir) && strings.Contains(strings.ToLower(ir.ErrorMessage()), "deletion")
}

// backoff waits 200 ms, 400 ms, ... between attempts.
func backoff(ctx context.Context, attempt int) error {
	t := time.NewTimer(time.Duration(100<<attempt) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
