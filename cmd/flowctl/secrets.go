package main

import (
	"errors"
	"fmt"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/spf13/cobra"

	"flowservice/pkg/awsdev"
	"flowservice/pkg/smsecrets"
)

// secretsCmd holds what an operator does to a stage's secrets on AWS.
func (c *cli) secretsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "secrets", Short: "A stage's secrets in Secrets Manager (--backend aws)"}
	migrate := &cobra.Command{
		Use:   "migrate",
		Short: "Move secrets kept one per value by earlier releases into one secret per project",
		Long: `migrate moves a stage's secrets of earlier releases, one Secrets Manager secret
per value (flow/<stage>/<project>/<name>), into each project's one secret
(flow/<stage>/<project>), marks every project's secret migrated and schedules
the earlier secrets' deletion with a 7-day recovery window.

Until it runs, the functions read a value missing from a project's secret from
its earlier secret (one more read), so nothing breaks meanwhile. A value the
project's secret already holds is newer and is kept. Running it again changes
nothing. It needs secretsmanager:ListSecrets, GetSecretValue, CreateSecret,
PutSecretValue, UpdateSecretVersionStage, TagResource and DeleteSecret on the
stage's secrets (an operator's credentials, not a function's role).`,
		Args: positional("secrets migrate"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if c.backend != "aws" {
				return errors.New("secrets migrate works on a stage on AWS: pass --backend aws --aws-prefix flow-<stage>")
			}
			awsCfg, err := awsconfig.LoadDefaultConfig(cmd.Context())
			if err != nil {
				return err
			}
			client := secretsmanager.NewFromConfig(awsCfg)
			rep, err := smsecrets.New(client, awsdev.SecretPrefix(c.awsPrefix)).Migrate(cmd.Context(), client)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.json(rep)
			}
			_, err = fmt.Fprintf(c.stdout, "%d projects migrated: %d values copied, %d kept (newer in the project's secret), %d earlier secrets scheduled for deletion\n",
				rep.Projects, rep.Copied, rep.Kept, rep.Deleted)
			return err
		},
	}
	cmd.AddCommand(migrate)
	return cmd
}
