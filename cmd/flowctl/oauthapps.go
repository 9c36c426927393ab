package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"flowservice/pkg/automation"
)

// oauthAppsCmd configures the operator's OAuth2 apps (docs/operations.md,
// "OAuth2 connections"), straight
// on the data directory or the stage's tables, like projects and keys:
// they are shared by every project, so no project's API key may change them.
func (c *cli) oauthAppsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "oauth-apps", Short: "OAuth2 apps the dashboard's Connect buttons use (operator-wide)"}

	var in automation.OAuthAppInput
	var scopes string
	var fromStdin bool
	add := &cobra.Command{
		Use:   "add NAME --client-id ID --client-secret-stdin --authorize-url URL --token-url URL [--scopes \"a b\"]",
		Short: "Add an OAuth2 app; the client secret is read from stdin",
		Long: `Add an OAuth2 app. Register the app at the provider with the redirect URL
{base_url}/ui/oauth/callback (for make run: http://127.0.0.1:8080/ui/oauth/callback),
then:

    flowctl oauth-apps add github --client-id Iv1.abc --client-secret-stdin \
      --authorize-url https://github.com/login/oauth/authorize \
      --token-url https://github.com/login/oauth/access_token --scopes "repo" < github.secret

For an app of the catalog (slack, github, notion, google_sheets, linear,
hubspot: GET /api/v1/apps) the endpoints and scopes are the catalog's:

    flowctl oauth-apps add slack --client-id 123.456 --client-secret-stdin < slack.secret

The client secret is stored encrypted (Secrets Manager on AWS) and never shown again.
The connections page then offers "Connect github".`,
		Args: positional("add NAME"),
		// The secret is read before the backend is opened.
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if !fromStdin {
				return errors.New("--client-secret-stdin is required: the client secret is read from stdin, never from the command line")
			}
			raw, err := io.ReadAll(io.LimitReader(c.stdin, 64<<10))
			if err != nil {
				return fmt.Errorf("reading the client secret from stdin: %w", err)
			}
			in.Name, in.ClientSecret = args[0], strings.TrimRight(string(raw), "\r\n")
			if strings.TrimSpace(in.ClientSecret) == "" {
				return errors.New("stdin held no client secret: pipe it into --client-secret-stdin")
			}
			in.Scopes = strings.Fields(scopes)
			return nil
		},
		RunE: c.withService(func(ctx context.Context, svc *automation.Service, args []string) error {
			a, err := svc.AddOAuthApp(ctx, in)
			if err != nil {
				return err
			}
			return show(c, a, []automation.OAuthApp{a}, oauthAppTable)
		}),
	}
	add.Flags().StringVar(&in.ClientID, "client-id", "", "the client ID the provider gave (required)")
	add.Flags().BoolVar(&fromStdin, "client-secret-stdin", false, "read the client secret from stdin (required)")
	add.Flags().StringVar(&in.AuthorizeURL, "authorize-url", "", "the provider's authorization endpoint (required unless NAME is a catalog app)")
	add.Flags().StringVar(&in.TokenURL, "token-url", "", "the provider's token endpoint (required unless NAME is a catalog app)")
	add.Flags().StringVar(&scopes, "scopes", "", `scopes to ask for, separated by spaces: "a b"`)
	// An app of the catalog (GET /api/v1/apps) brings its endpoints and
	// scopes: only the client is the operator's to give.
	_ = add.MarkFlagRequired("client-id")

	list := &cobra.Command{
		Use:   "list",
		Short: "List OAuth2 apps (never their secrets)",
		Args:  positional("list"),
		RunE: c.withService(func(ctx context.Context, svc *automation.Service, args []string) error {
			apps, err := svc.OAuthApps(ctx)
			if err != nil {
				return err
			}
			return show(c, apps, apps, oauthAppTable)
		}),
	}
	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove an OAuth2 app and its secret; its connections stop refreshing",
		Args:  positional("remove NAME"),
		RunE: c.withService(func(ctx context.Context, svc *automation.Service, args []string) error {
			if err := svc.RemoveOAuthApp(ctx, args[0]); err != nil {
				return err
			}
			_, err := fmt.Fprintln(c.stdout, "removed", args[0])
			return err
		}),
	}
	cmd.AddCommand(add, list, remove)
	return cmd
}

var oauthAppTable = table[automation.OAuthApp]{
	header: []string{"NAME", "CLIENT ID", "SCOPES", "AUTHORIZE URL", "TOKEN URL", "CREATED"},
	row: func(a automation.OAuthApp) []string {
		sc := strings.Join(a.Scopes, " ")
		if sc == "" {
			sc = "-"
		}
		return []string{a.Name, a.ClientID, sc, a.AuthorizeURL, a.TokenURL, stamp(a.Created)}
	},
}
