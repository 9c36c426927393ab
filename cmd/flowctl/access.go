package main

import (
	"strings"

	"github.com/spf13/cobra"

	"flowservice/pkg/automation"
)

// auditCmd lists the project's audit log on a running server
// (docs/access.md).
func (c *cli) auditCmd() *cobra.Command {
	var lf listFlags
	var since, until string
	cmd := &cobra.Command{
		Use:   "audit [--since T] [--until T] [--limit N] [--all]",
		Short: "The project's audit log, newest first, on a running server (--url, --api-key)",
		Args:  positional("audit"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			q := lf.query()
			if since != "" {
				q.Set("since", since)
			}
			if until != "" {
				q.Set("until", until)
			}
			p, raw, err := fetchList[automation.AuditEntry](cmd.Context(), api, "/api/v1/audit", q, lf.all)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			rows := make([][]string, len(p.Data))
			for i, e := range p.Data {
				rows[i] = []string{stamp(e.Time), e.Action, e.Resource.Type + " " + e.Resource.ID,
					actorOf(e.Actor), dash(string(e.Actor.Role)), dash(e.SourceIP), e.RequestID}
			}
			if err := c.rows([]string{"TIME", "ACTION", "RESOURCE", "ACTOR", "ROLE", "FROM", "REQUEST"}, rows); err != nil {
				return err
			}
			c.more(p.Cursor, p.HasMore)
			return nil
		},
	}
	lf.add(cmd)
	cmd.Flags().StringVar(&since, "since", "", "only entries at or after this RFC 3339 time")
	cmd.Flags().StringVar(&until, "until", "", "only entries before this RFC 3339 time")
	return cmd
}

// actorOf names who acted: a person's email, else the key's ID.
func actorOf(a automation.AuditActor) string {
	if a.Email != "" {
		return a.Email
	}
	return dash(a.KeyID)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// connectionValue is the value of a connection of type typ whose secret
// came from stdin: the API's shapes (docs/access.md). Another type is
// sent as an API key value for the server to refuse, naming the allowed
// types.
func connectionValue(typ, secret, header, prefix string, prefixSet bool, username, queryParam string) map[string]string {
	switch strings.ToUpper(typ) {
	case string(automation.ConnectionBasic):
		return map[string]string{"username": username, "password": secret}
	case string(automation.ConnectionHeader):
		return map[string]string{"name": header, "value": secret}
	case string(automation.ConnectionQuery):
		return map[string]string{"name": queryParam, "value": secret}
	}
	value := map[string]string{"apiKey": secret}
	if header != "" {
		value["header"] = header
	}
	if prefixSet {
		value["prefix"] = prefix
	}
	return value
}

// splitList reads a comma-separated flag value.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
