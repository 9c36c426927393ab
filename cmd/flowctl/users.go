package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"flowservice/pkg/automation"
)

// usersCmd manages a project's people on the data directory or a stage's
// tables, like keys (docs/access.md#people).
func (c *cli) usersCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "users", Short: "Invite, list and remove the people of a project"}
	var project, email, role, dashboard string
	invite := &cobra.Command{
		Use:   "invite --project NAME --email EMAIL --role ROLE",
		Short: "Invite a person; prints the one-time set-up link (valid 7 days)",
		Args:  positional("invite"),
		RunE: c.withService(func(ctx context.Context, svc *automation.Service, args []string) error {
			p, err := svc.ProjectByName(ctx, project)
			if err != nil {
				return err
			}
			inv, err := svc.InviteUser(ctx, p.ID, email, automation.Role(role))
			if err != nil {
				return err
			}
			base := dashboard
			if base == "" {
				base = c.url
			}
			link := strings.TrimRight(base, "/") + "/ui/setup?token=" + url.QueryEscape(inv.SetupToken)
			if c.output == "json" {
				return c.json(map[string]any{"id": inv.Member.ID, "email": inv.Member.Email, "role": inv.Member.Role,
					"status": inv.Member.Status, "setupUrl": link, "setupExpires": inv.Expires.Format(time.RFC3339)})
			}
			_, err = fmt.Fprintln(c.stdout, link)
			return err
		}),
	}
	invite.Flags().StringVar(&project, "project", "", "project name (required)")
	invite.Flags().StringVar(&email, "email", "", "the person's email (required)")
	invite.Flags().StringVar(&role, "role", "", "admin, editor, operator or viewer (required)")
	invite.Flags().StringVar(&dashboard, "dashboard-url", "", "the dashboard's public address for the link (default --url)")
	for _, f := range []string{"project", "email", "role"} {
		_ = invite.MarkFlagRequired(f)
	}
	var listProject string
	list := &cobra.Command{
		Use:   "list --project NAME",
		Short: "List the project's people",
		Args:  positional("list"),
		RunE: c.withService(func(ctx context.Context, svc *automation.Service, args []string) error {
			p, err := svc.ProjectByName(ctx, listProject)
			if err != nil {
				return err
			}
			us, err := svc.Users(ctx, p.ID)
			if err != nil {
				return err
			}
			return show(c, us, us, userTable)
		}),
	}
	list.Flags().StringVar(&listProject, "project", "", "project name (required)")
	_ = list.MarkFlagRequired("project")
	var removeProject string
	remove := &cobra.Command{
		Use:   "remove --project NAME USER",
		Short: "Remove a person (USER: an ID or an email) from the project: sessions end, personal keys are revoked",
		Args:  positional("remove USER"),
		RunE: c.withService(func(ctx context.Context, svc *automation.Service, args []string) error {
			p, err := svc.ProjectByName(ctx, removeProject)
			if err != nil {
				return err
			}
			id := args[0]
			if strings.Contains(id, "@") {
				us, err := svc.Users(ctx, p.ID)
				if err != nil {
					return err
				}
				id = ""
				for _, u := range us {
					if strings.EqualFold(u.Email, args[0]) {
						id = u.ID
					}
				}
				if id == "" {
					return automation.NotFound("user", args[0])
				}
			}
			if err := svc.RemoveUser(ctx, p.ID, id); err != nil {
				return err
			}
			_, err = fmt.Fprintln(c.stdout, "removed", id)
			return err
		}),
	}
	remove.Flags().StringVar(&removeProject, "project", "", "project name (required)")
	_ = remove.MarkFlagRequired("project")
	cmd.AddCommand(invite, list, remove)
	return cmd
}

var userTable = table[automation.Member]{
	header: []string{"ID", "EMAIL", "ROLE", "STATUS", "SINCE"},
	row: func(m automation.Member) []string {
		return []string{m.ID, m.Email, string(m.Role), m.Status, m.Created.Format(time.RFC3339)}
	},
}
