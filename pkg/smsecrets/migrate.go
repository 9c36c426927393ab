package smsecrets

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// Lister lists a stage's secrets: what Migrate needs beyond API. Only the
// operator's migration calls it (flowctl secrets migrate), so the functions'
// roles never get secretsmanager:ListSecrets, which IAM cannot scope to a
// prefix.
type Lister interface {
	ListSecrets(ctx context.Context, in *secretsmanager.ListSecretsInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.ListSecretsOutput, error)
}

// MigrationReport says what Migrate did.
type MigrationReport struct {
	// Projects is how many project documents are now marked migrated.
	Projects int
	// Copied is how many values of earlier secrets went into documents;
	// Kept how many were not copied because the document already had a
	// newer value of that name.
	Copied, Kept int
	// Deleted is how many earlier secrets were scheduled for deletion.
	Deleted int
}

// MigrationRecoveryDays is the recovery window of the earlier secrets
// Migrate deletes: they are copies by then, and an operator can still
// restore one for a week should the migration have gone wrong.
const MigrationRecoveryDays = 7

// Migrate moves the stage's secrets of earlier releases, one secret per
// value (<prefix>/<project>/<name>), into their projects' documents, marks
// every document of the stage migrated (reads then never look for an
// earlier secret), and schedules the earlier secrets' deletion. A value the
// document already holds is newer (written by this release) and is kept.
// It is idempotent: a second run finds nothing to copy.
func (s *Store) Migrate(ctx context.Context, l Lister) (MigrationReport, error) {
	var rep MigrationReport
	legacy := map[string][]string{} // project → names
	docs := map[string]bool{}
	in := &secretsmanager.ListSecretsInput{
		Filters: []types.Filter{{Key: types.FilterNameStringTypeName, Values: []string{s.prefix + "/"}}},
	}
	for {
		out, err := l.ListSecrets(ctx, in)
		if err != nil {
			return rep, fmt.Errorf("smsecrets: list secrets under %s/: %w", s.prefix, err)
		}
		for _, e := range out.SecretList {
			rest, ok := strings.CutPrefix(aws.ToString(e.Name), s.prefix+"/")
			if !ok || rest == "" || e.DeletedDate != nil {
				continue // the name filter matches by prefix of words too
			}
			if project, name, ok := strings.Cut(rest, "/"); ok {
				legacy[project] = append(legacy[project], name)
			} else {
				docs[rest] = true
			}
		}
		if out.NextToken == nil {
			break
		}
		in.NextToken = out.NextToken
	}
	projects := make([]string, 0, len(docs)+len(legacy))
	for p := range docs {
		projects = append(projects, p)
	}
	for p := range legacy {
		if !docs[p] {
			projects = append(projects, p)
		}
	}
	sort.Strings(projects)
	for _, project := range projects {
		values := map[string][]byte{}
		for _, name := range legacy[project] {
			v, err := s.legacy(ctx, project, name)
			if err != nil {
				return rep, fmt.Errorf("smsecrets: migrate project %s: %w", project, err)
			}
			values[name] = v
		}
		var copied, kept int
		err := s.update(ctx, project, func(d *document) (bool, error) {
			copied, kept = 0, 0
			for name, v := range values {
				if _, ok := d.Values[name]; ok {
					kept++
					continue
				}
				d.Values[name] = v
				copied++
			}
			changed := copied > 0 || !d.Migrated
			d.Migrated = true
			return changed, nil
		})
		if err != nil {
			return rep, fmt.Errorf("smsecrets: migrate project %s: %w", project, err)
		}
		rep.Projects++
		rep.Copied += copied
		rep.Kept += kept
		for _, name := range legacy[project] {
			_, err := s.sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{
				SecretId: aws.String(s.LegacyName(project, name)), RecoveryWindowInDays: aws.Int64(MigrationRecoveryDays),
			})
			if err != nil && !isNotFound(err) && !isScheduledForDeletion(err) {
				return rep, fmt.Errorf("smsecrets: migrate project %s: delete %s: %w", project, s.LegacyName(project, name), err)
			}
			rep.Deleted++
		}
	}
	return rep, nil
}
