// Command flowctl administers a flowd installation: projects and API keys,
// straight on its data directory (safely while flowd runs on it) or on a
// deployed stage's tables; and flows, runs and connections through a
// running server's management API.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flowservice/pkg/apps"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/datadir"
	"flowservice/pkg/engine"
)

func main() {
	if err := newRoot(os.Stdin, os.Stdout, os.Stderr).Execute(); err != nil {
		var code exitError
		if errors.As(err, &code) {
			os.Exit(code.code)
		}
		fmt.Fprintln(os.Stderr, "flowctl:", err)
		os.Exit(1)
	}
}

// cli holds the global flags and opens the data directory or the API client
// on demand.
type cli struct {
	dataDir   string
	backend   string
	awsPrefix string
	output    string
	url       string
	apiKey    string
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "flowctl",
		Short: "Administer flowd: projects and keys on its data, flows and runs through its API",
		Long: `flowctl administers a flowd installation.

projects and keys work straight on a data directory (--data-dir), also while
flowd runs on it, or on a deployed stage's tables (--backend aws).

flows, runs and connections talk to a running server's management API:
--url picks it (default $FLOWCTL_URL, else http://127.0.0.1:8080) and
--api-key authenticates (default $FLOWCTL_API_KEY, else the initial-api-key
file in --data-dir, which flowd writes on its first start, for a server on
this machine only).`,
		SilenceUsage:  true,
		SilenceErrors: true, // main prints "flowctl: <error>"
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	def := os.Getenv("FLOWD_DATA_DIR")
	if def == "" {
		def = ".flowd"
	}
	root.PersistentFlags().StringVar(&c.dataDir, "data-dir", def, "flowd data directory (FLOWD_DATA_DIR)")
	backend := os.Getenv("FLOWD_BACKEND")
	if backend == "" {
		backend = "embedded"
	}
	root.PersistentFlags().StringVar(&c.backend, "backend", backend, "embedded (a data directory) or aws (a deployed stage's tables; FLOWD_BACKEND)")
	root.PersistentFlags().StringVar(&c.awsPrefix, "aws-prefix", "flow-dev", "with --backend aws: the stage's table prefix, flow-<stage>")
	root.PersistentFlags().StringVarP(&c.output, "output", "o", "table", "output format: table or json")
	defURL := os.Getenv("FLOWCTL_URL")
	if defURL == "" {
		defURL = "http://127.0.0.1:8080"
	}
	root.PersistentFlags().StringVar(&c.url, "url", defURL, "management API of a running flowd or stage (FLOWCTL_URL)")
	// No default shown: help must never print a key taken from the environment.
	root.PersistentFlags().StringVar(&c.apiKey, "api-key", "", "API key for --url (default $FLOWCTL_API_KEY, else <data-dir>/initial-api-key when --url is this machine)")
	root.AddCommand(c.projectsCmd(), c.keysCmd(), c.flowsCmd(), c.runsCmd(), c.connectionsCmd(), c.oauthAppsCmd(), c.auditCmd(),
		c.exportCmd(), c.applyCmd(), c.variablesCmd(),
		c.subscriptionsCmd(), // subscriptions.go
		c.approvalsCmd(),     // approvals.go
		c.usersCmd(),         // users.go
		c.migrateCmd(),       // migrate.go
		c.secretsCmd())       // secrets.go
	return root
}

// service opens the data directory and a Service over it.
func (c *cli) service(ctx context.Context) (*automation.Service, func(), error) {
	if c.output != "table" && c.output != "json" {
		return nil, nil, fmt.Errorf("--output %q: allowed values are table, json", c.output)
	}
	switch c.backend {
	case "aws":
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, nil, err
		}
		svc, err := awsdev.NewAdminService(awsCfg, c.awsPrefix)
		return svc, func() {}, err
	case "embedded":
	default:
		return nil, nil, fmt.Errorf("--backend %q: allowed values are embedded, aws", c.backend)
	}
	if _, err := os.Stat(c.dataDir); err != nil {
		return nil, nil, fmt.Errorf("data directory %s: %w (start flowd once, or pass --data-dir)", c.dataDir, err)
	}
	dir, err := datadir.Open(ctx, c.dataDir)
	if err != nil {
		return nil, nil, err
	}
	svc, err := automation.NewService(automation.Config{
		Store: dir.Store, Secrets: dir.Secrets, Checker: engine.Checker{}, CursorKey: dir.CursorKey,
		OAuthApps: dir.Store, Polls: dir.Store, Users: dir.Store, Apps: apps.MustLoad(),
	})
	if err != nil {
		dir.Close()
		return nil, nil, err
	}
	return svc, func() { dir.Close() }, nil
}

// withService is the RunE of the commands that work on the data directory
// or the stage's tables (--backend): fn runs on a Service over them, which
// is closed after.
func (c *cli) withService(fn func(ctx context.Context, svc *automation.Service, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		svc, done, err := c.service(cmd.Context())
		if err != nil {
			return err
		}
		defer done()
		return fn(cmd.Context(), svc, args)
	}
}

func (c *cli) projectsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "projects", Short: "Create and list projects"}
	var plan string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a project",
		Args:  positional("create NAME"),
		RunE: c.withService(func(ctx context.Context, svc *automation.Service, args []string) error {
			p, err := svc.CreateProject(ctx, args[0], automation.Plan(strings.ToUpper(plan)))
			if err != nil {
				return err
			}
			return show(c, p, []automation.Project{p}, projectTable)
		}),
	}
	create.Flags().StringVar(&plan, "plan", string(automation.PlanFree), "plan: FREE, TEAM or ENTERPRISE")
	list := &cobra.Command{
		Use:   "list",
		Short: "List projects",
		Args:  positional("list"),
		RunE: c.withService(func(ctx context.Context, svc *automation.Service, args []string) error {
			ps, err := svc.Projects(ctx)
			if err != nil {
				return err
			}
			return show(c, ps, ps, projectTable)
		}),
	}
	cmd.AddCommand(create, list, c.setLimitsCmd())
	return cmd
}

func (c *cli) keysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Create, list and revoke API keys"}
	var project, role string
	create := &cobra.Command{
		Use:   "create --project NAME [--role ROLE]",
		Short: "Create an API key; prints the key alone, once",
		Args:  positional("list"),
		RunE: c.withService(func(ctx context.Context, svc *automation.Service, args []string) error {
			p, err := svc.ProjectByName(ctx, project)
			if err != nil {
				return err
			}
			key, k, err := svc.CreateAPIKeyWithRole(ctx, p.ID, automation.Role(role))
			if err != nil {
				return err
			}
			if c.output == "json" {
				// The key beside the record's fields (APIKey has its own
				// MarshalJSON, which an embedding struct would inherit).
				raw, err := json.Marshal(k)
				if err != nil {
					return err
				}
				var out map[string]any
				if err := json.Unmarshal(raw, &out); err != nil {
					return err
				}
				out["key"] = key
				return c.json(out)
			}
			_, err = fmt.Fprintln(c.stdout, key)
			return err
		}),
	}
	create.Flags().StringVar(&project, "project", "", "project name (required)")
	_ = create.MarkFlagRequired("project")
	create.Flags().StringVar(&role, "role", string(automation.RoleAdmin),
		"what the key may do: admin, editor, operator or viewer (docs/access.md)")
	var listProject string
	list := &cobra.Command{
		Use:   "list [--project NAME]",
		Short: "List API keys (never the keys themselves)",
		Args:  positional("list"),
		RunE: c.withService(func(ctx context.Context, svc *automation.Service, args []string) error {
			id := ""
			if listProject != "" {
				p, err := svc.ProjectByName(ctx, listProject)
				if err != nil {
					return err
				}
				id = p.ID
			}
			ks, err := svc.APIKeys(ctx, id)
			if err != nil {
				return err
			}
			return show(c, ks, ks, keyTable)
		}),
	}
	list.Flags().StringVar(&listProject, "project", "", "only this project's keys")
	revoke := &cobra.Command{
		Use:   "revoke KEY_ID",
		Short: "Revoke an API key at once",
		Args:  positional("revoke KEY_ID"),
		RunE: c.withService(func(ctx context.Context, svc *automation.Service, args []string) error {
			if err := svc.RevokeAPIKey(ctx, args[0]); err != nil {
				return err
			}
			_, err := fmt.Fprintln(c.stdout, "revoked", args[0])
			return err
		}),
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// table says how to show a list of T as columns.
type table[T any] struct {
	header []string
	row    func(T) []string
}

var projectTable = table[automation.Project]{
	header: []string{"ID", "NAME", "PLAN", "CREATED"},
	row: func(p automation.Project) []string {
		return []string{p.ID, p.Name, string(p.Plan), p.Created.Format(time.RFC3339)}
	},
}

var keyTable = table[automation.APIKey]{
	header: []string{"ID", "PROJECT", "ROLE", "PREFIX", "CREATED", "REVOKED", "USER"},
	row: func(k automation.APIKey) []string {
		revoked := "-"
		if k.Revoked != nil {
			revoked = k.Revoked.Format(time.RFC3339)
		}
		return []string{k.ID, k.Project, string(k.Role), k.Prefix + "…", k.Created.Format(time.RFC3339), revoked, dash(k.User)}
	},
}

// show writes rows as an aligned table, or v as JSON with -o json.
func show[T any](c *cli, v any, rows []T, t table[T]) error {
	if c.output == "json" {
		return c.json(v)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(t.row(r), "\t"))
	}
	return tw.Flush()
}

func (c *cli) json(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
