// Package smsecrets implements automation.Secrets on AWS Secrets Manager, for
// the service's AWS deployment: one secret per project, named
// <prefix>/<project>, holding every secret value of the project (secret
// variables, connection credentials, flow secrets) as one JSON document, so
// that a project costs one secret ($0.40 a month) whatever it stores. IAM
// policies scope a function to one stage's secrets (prefix/*) and
// CloudTrail names every access by project.
//
// Writes are optimistic: a writer reads the document and the version that
// carries AWSCURRENT, writes the changed document as a new version under a
// label of its own (pendingStage), then moves AWSCURRENT to it with
// UpdateSecretVersionStage naming the version it read as the one to move
// from. Secrets Manager refuses that move when AWSCURRENT is on another
// version, that is when another writer got there first; the writer then
// reads again and applies its change to the newer document, so that no
// write is lost (docs/aws.md "Secrets: one secret per project").
//
// Secrets written by earlier releases, one secret per value named
// <prefix>/<project>/<name>, are still read while the project's document
// is not marked migrated (Migrate copies them in and marks it).
package smsecrets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

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
	UpdateSecretVersionStage(ctx context.Context, in *secretsmanager.UpdateSecretVersionStageInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.UpdateSecretVersionStageOutput, error)
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
	DeleteSecret(ctx context.Context, in *secretsmanager.DeleteSecretInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.DeleteSecretOutput, error)
}

var _ API = (*secretsmanager.Client)(nil)

// MaxDocumentBytes is the most a project's document may take: Secrets
// Manager's limit on a secret value (65,536 bytes). Values are kept in
// the document as text when they are UTF-8 (base64 otherwise), so 200
// values of 256 bytes fit. A write that would pass it is refused with 403
// QUOTA_EXCEEDED naming the bound; nothing spills to a second secret.
const MaxDocumentBytes = 65536

// pendingStage labels a version written but not yet made current. A
// version with no label at all may be removed by Secrets Manager; the
// label keeps it until the writer moves AWSCURRENT to it (a label is on
// one version at a time, so the label moves with every write).
const pendingStage = "FLOWPENDING"

// updateAttempts bounds the read-change-write rounds of one write: each
// lost round is a write another writer made, so with fewer than
// updateAttempts writers at once on one project every write lands.
const updateAttempts = 12

// document is a project's secret: its values by name.
type document struct {
	// Migrated says the project's secrets of earlier releases (one secret
	// per value) have been copied in and deleted: a missing name is
	// missing, with no second read.
	Migrated bool
	Values   map[string][]byte
}

// stored is a document as JSON: a value that is UTF-8 text (credentials,
// tokens, variables: nearly all) as a string, so that it takes its own size
// in the 64 KB rather than base64's four thirds; any other as base64.
type stored struct {
	Migrated bool              `json:"migrated,omitempty"`
	Text     map[string]string `json:"text,omitempty"`
	Binary   map[string][]byte `json:"binary,omitempty"`
}

func (d document) MarshalJSON() ([]byte, error) {
	st := stored{Migrated: d.Migrated, Text: map[string]string{}, Binary: map[string][]byte{}}
	for k, v := range d.Values {
		if utf8.Valid(v) {
			st.Text[k] = string(v)
		} else {
			st.Binary[k] = v
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // <, > and & as themselves, not six bytes each
	if err := enc.Encode(st); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func (d *document) UnmarshalJSON(b []byte) error {
	var st stored
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	d.Migrated, d.Values = st.Migrated, make(map[string][]byte, len(st.Text)+len(st.Binary))
	for k, v := range st.Text {
		d.Values[k] = []byte(v)
	}
	for k, v := range st.Binary {
		d.Values[k] = v
	}
	return nil
}

// Store keeps secrets in Secrets Manager. It is safe for concurrent use.
type Store struct {
	sm     API
	prefix string
	// pause waits between attempts: a name still being deleted, a write
	// that lost the race for AWSCURRENT.
	pause func(ctx context.Context, attempt int) error
}

var _ automation.Secrets = (*Store)(nil)

// New returns a Store whose project documents are named prefix/<project>;
// the prefix carries the stage, such as "flow/dev".
func New(client API, prefix string) *Store {
	return &Store{sm: client, prefix: strings.TrimSuffix(prefix, "/"), pause: backoff}
}

// DocumentName returns the Secrets Manager name of a project's secrets.
func (s *Store) DocumentName(project string) string { return s.prefix + "/" + project }

// LegacyName returns the name an earlier release gave a project's secret:
// one secret per value.
func (s *Store) LegacyName(project, name string) string {
	return s.prefix + "/" + project + "/" + name
}

// PutSecret sets a value in the project's document.
func (s *Store) PutSecret(ctx context.Context, project, name string, value []byte) error {
	if len(value) == 0 {
		// Secrets Manager refused empty values as secrets of their own;
		// none of the service's secrets is empty.
		return fmt.Errorf("smsecrets: put secret %s of project %s: empty value", name, project)
	}
	return s.update(ctx, project, func(d *document) (bool, error) {
		if old, ok := d.Values[name]; ok && string(old) == string(value) {
			return false, nil
		}
		d.Values[name] = value
		return true, nil
	})
}

// Secret returns the current value of a secret.
func (s *Store) Secret(ctx context.Context, project, name string) ([]byte, error) {
	d, _, err := s.read(ctx, project)
	if err != nil {
		return nil, err
	}
	if v, ok := d.Values[name]; ok {
		return v, nil
	}
	if d.Migrated {
		return nil, automation.NotFound("secret", name)
	}
	return s.legacy(ctx, project, name)
}

// DeleteSecret removes a value from the project's document, and the
// secret an earlier release kept it in while the project is not migrated:
// a revoked credential must not come back from there.
func (s *Store) DeleteSecret(ctx context.Context, project, name string) error {
	migrated := false
	err := s.update(ctx, project, func(d *document) (bool, error) {
		migrated = d.Migrated
		if _, ok := d.Values[name]; !ok {
			return false, nil
		}
		delete(d.Values, name)
		return true, nil
	})
	if err != nil || migrated {
		return err
	}
	return s.deleteLegacy(ctx, s.LegacyName(project, name))
}

// read returns the project's document and the ID of its AWSCURRENT
// version; a project without one has an empty document and no ID.
func (s *Store) read(ctx context.Context, project string) (document, string, error) {
	id := s.DocumentName(project)
	d := document{Values: map[string][]byte{}}
	// The stage is named although it is the default: moto answers the
	// version that was current when it was written otherwise, not the one
	// UpdateSecretVersionStage made current.
	out, err := s.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id), VersionStage: aws.String("AWSCURRENT")})
	if isNotFound(err) || isScheduledForDeletion(err) {
		return d, "", nil
	}
	if err != nil {
		return d, "", fmt.Errorf("smsecrets: read secrets of project %s (%s): %w", project, id, err)
	}
	if out.SecretString == nil {
		return d, "", fmt.Errorf("smsecrets: read secrets of project %s (%s): not a document", project, id)
	}
	if err := json.Unmarshal([]byte(*out.SecretString), &d); err != nil {
		return d, "", fmt.Errorf("smsecrets: read secrets of project %s (%s): %w", project, id, err)
	}
	if d.Values == nil {
		d.Values = map[string][]byte{}
	}
	return d, aws.ToString(out.VersionId), nil
}

// update applies change to the project's document and writes it, again on
// the newer document whenever another writer moved AWSCURRENT meanwhile.
// change reports whether it changed anything; nothing changed is no write.
func (s *Store) update(ctx context.Context, project string, change func(*document) (bool, error)) error {
	id := s.DocumentName(project)
	var lastErr error
	for attempt := 0; attempt < updateAttempts; attempt++ {
		if attempt > 0 {
			if err := s.pause(ctx, attempt); err != nil {
				return fmt.Errorf("smsecrets: write secrets of project %s: %w", project, err)
			}
		}
		d, current, err := s.read(ctx, project)
		if err != nil {
			return err
		}
		changed, err := change(&d)
		if err != nil || !changed {
			return err
		}
		body, err := d.MarshalJSON() // not json.Marshal, which would escape <, > and & again
		if err != nil {
			return fmt.Errorf("smsecrets: write secrets of project %s: %w", project, err)
		}
		if len(body) > MaxDocumentBytes {
			return automation.Forbidden("QUOTA_EXCEEDED",
				"the project's secrets (secret variables, connection credentials and flow secrets together) would take %d bytes, over the %d a project holds on AWS (one Secrets Manager secret); delete secrets it no longer uses",
				len(body), MaxDocumentBytes)
		}
		if current == "" {
			_, err := s.sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
				Name: aws.String(id), SecretString: aws.String(string(body)),
				Description: aws.String("flow service secrets of project " + project),
				Tags:        []types.Tag{{Key: aws.String("project"), Value: aws.String(project)}},
			})
			var exists *types.ResourceExistsException
			switch {
			case err == nil:
				return nil
			case errors.As(err, &exists), isScheduledForDeletion(err):
				lastErr = err // another writer created it, or it is still going: read again
				continue
			default:
				return fmt.Errorf("smsecrets: create secrets of project %s (%s): %w", project, id, err)
			}
		}
		put, err := s.sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
			SecretId: aws.String(id), SecretString: aws.String(string(body)), VersionStages: []string{pendingStage},
		})
		if isNotFound(err) || isScheduledForDeletion(err) {
			lastErr = err
			continue
		}
		if err != nil {
			return fmt.Errorf("smsecrets: write secrets of project %s (%s): %w", project, id, err)
		}
		_, err = s.sm.UpdateSecretVersionStage(ctx, &secretsmanager.UpdateSecretVersionStageInput{
			SecretId: aws.String(id), VersionStage: aws.String("AWSCURRENT"),
			MoveToVersionId: put.VersionId, RemoveFromVersionId: aws.String(current),
		})
		if err == nil {
			return nil
		}
		if lostRace(err) || isNotFound(err) {
			lastErr = err
			continue
		}
		return fmt.Errorf("smsecrets: write secrets of project %s (%s): %w", project, id, err)
	}
	return fmt.Errorf("smsecrets: write secrets of project %s: %w (last: %v)", project,
		automation.Conflict("CONFLICT", "the project's secrets changed %d times while this write was being made; try again", updateAttempts), lastErr)
}

// legacy reads a value kept the earlier way, as a secret of its own.
func (s *Store) legacy(ctx context.Context, project, name string) ([]byte, error) {
	id := s.LegacyName(project, name)
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

// deleteLegacy deletes a secret of its own at once, without the recovery
// window: a revoked credential must not be restorable by anyone.
func (s *Store) deleteLegacy(ctx context.Context, id string) error {
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

// lostRace recognizes UpdateSecretVersionStage's refusal to move
// AWSCURRENT from a version that no longer has it.
func lostRace(err error) bool {
	var ip *types.InvalidParameterException
	var ir *types.InvalidRequestException
	return errors.As(err, &ip) || errors.As(err, &ir) && !isScheduledForDeletion(err)
}

// backoff waits about 25 ms, 50 ms, ... up to 800 ms between attempts,
// with jitter so that writers that lost to each other do not meet again.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(25<<min(attempt-1, 5)) * time.Millisecond
	t := time.NewTimer(d/2 + rand.N(d/2+1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
