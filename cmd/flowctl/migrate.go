package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"flowservice/pkg/pgmigrate"
	"flowservice/pkg/sealedsecrets"
)

// migrateCmd copies an embedded installation into PostgreSQL for flowd
// nodes (pkg/pgmigrate). The URL and the key are never printed.
func (c *cli) migrateCmd() *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "migrate --from-data-dir DIR --to URL",
		Short: "Copy an embedded installation (a data directory) into PostgreSQL for flowd nodes",
		Long: `migrate copies every project, API key, flow (with its versions, drafts and
state), connection, variable, subscription and run of the data directory DIR
into the PostgreSQL database at URL, and seals every secret again with
FLOWD_SECRET_KEY (read from the environment: the key the nodes will use).

Stop flowd on DIR first (migrate takes its lock). Running it again copies
only what is missing, so an interrupted copy is finished by running it again.
The database must be new or hold only this installation.`,
		Args: positional("migrate"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" || to == "" {
				return errors.New("migrate needs --from-data-dir DIR and --to postgres://user:password@host:5432/database")
			}
			if _, err := os.Stat(from); err != nil {
				return fmt.Errorf("--from-data-dir: %w", err)
			}
			key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(os.Getenv("FLOWD_SECRET_KEY")))
			if err != nil || len(key) != sealedsecrets.KeySize {
				return errors.New("FLOWD_SECRET_KEY: want 32 random bytes in standard base64, the key the nodes will use (make one with: head -c 32 /dev/urandom | base64)")
			}
			rep, err := pgmigrate.Copy(cmd.Context(), from, to, key, c.stdout)
			if err != nil {
				return err
			}
			copied := 0
			for _, t := range rep.Tables {
				copied += t.Inserted
			}
			fmt.Fprintf(c.stdout, "migrated: %d rows copied, %d secrets sealed again; start flowd with FLOWD_BACKEND=postgres on it\n", copied, rep.Secrets)
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from-data-dir", "", "the data directory of the embedded installation")
	cmd.Flags().StringVar(&to, "to", "", "the PostgreSQL database of the nodes (postgres://user:password@host:5432/database)")
	return cmd
}
