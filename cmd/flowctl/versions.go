package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"flowservice/pkg/automation"
)

// Versions and drafts of a flow (docs/api.md, "Versions"): flowctl flows
// draft, publish, versions and restore.

func (c *cli) versionCommands() []*cobra.Command {
	var draftFile string
	var discard bool
	draft := &cobra.Command{
		Use:   "draft FLOW_ID [-f FILE|- | --discard]",
		Short: "Show, save (-f) or discard (--discard) a flow's draft; nothing that runs changes until it is published",
		Args:  positional("draft FLOW_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/api/v1/flows/" + url.PathEscape(args[0]) + "/draft"
			switch {
			case draftFile != "" && discard:
				return fmt.Errorf("-f and --discard cannot be given together: save a draft or discard it")
			case discard:
				return showDeleted(c, cmd.Context(), http.MethodDelete, path, []string{"draft of " + args[0]})
			case draftFile != "":
				body, err := c.readDefinition(draftFile)
				if err != nil {
					return err
				}
				return c.draftCall(cmd.Context(), http.MethodPut, path, body)
			}
			return c.draftCall(cmd.Context(), http.MethodGet, path, nil)
		},
	}
	draft.Flags().StringVarP(&draftFile, "file", "f", "", "JSON file with the definition fields (trigger, steps, onError), - for stdin")
	draft.Flags().BoolVar(&discard, "discard", false, "discard the draft")

	var message string
	var force bool
	publish := &cobra.Command{
		Use:   "publish FLOW_ID [-m MESSAGE] [--force]",
		Short: "Publish a flow's draft as its next version, live at once",
		Args:  positional("publish FLOW_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := json.Marshal(automation.PublishRequest{Message: message, Force: force})
			if err != nil {
				return err
			}
			return c.flowCall(cmd.Context(), http.MethodPost, "/api/v1/flows/"+url.PathEscape(args[0])+"/publish", body)
		},
	}
	publish.Flags().StringVarP(&message, "message", "m", "", "what the version changes, shown in its history")
	publish.Flags().BoolVar(&force, "force", false, "publish even though another version went live since the draft was started")

	var lf listFlags
	versions := &cobra.Command{
		Use:   "versions FLOW_ID [VERSION] [--limit N] [--all]",
		Short: "List a flow's versions, newest first, or show one version's definition",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				return nil
			}
			return positional("versions FLOW_ID")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			base := "/api/v1/flows/" + url.PathEscape(args[0]) + "/versions"
			if len(args) == 2 {
				if n, err := strconv.ParseInt(args[1], 10, 64); err != nil || n < 1 {
					return fmt.Errorf("VERSION must be a version number (1, 2, …), got %q", args[1])
				}
				var v automation.FlowVersion
				raw, err := api.do(cmd.Context(), http.MethodGet, base+"/"+url.PathEscape(args[1]), nil, nil, &v)
				if err != nil {
					return err
				}
				if c.output == "json" {
					return c.printJSON(raw)
				}
				if err := c.fields("Version", strconv.FormatInt(v.Version, 10), "Created", stamp(v.Created),
					"By", orDash(&v.CreatedBy), "Message", orDash(&v.Message)); err != nil {
					return err
				}
				def, err := json.MarshalIndent(v.Definition, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(c.stdout, "\n%s\n", def)
				return err
			}
			p, raw, err := fetchList[automation.FlowVersion](cmd.Context(), api, base, lf.query(), lf.all)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			rows := make([][]string, len(p.Data))
			for i, v := range p.Data {
				rows[i] = []string{strconv.FormatInt(v.Version, 10), stamp(v.Created), orDash(&v.CreatedBy), orDash(&v.Message)}
			}
			if err := c.rows([]string{"VERSION", "CREATED", "BY", "MESSAGE"}, rows); err != nil {
				return err
			}
			c.more(p.Cursor, p.HasMore)
			return nil
		},
	}
	lf.add(versions)

	return append([]*cobra.Command{draft, publish, versions}, c.commands(
		request{"restore FLOW_ID VERSION", "Publish a copy of an earlier version as the flow's next version", http.MethodPost,
			"/api/v1/flows/%s/versions/%s/restore", showFlow},
	)...)
}

// draftCall sends a request answered with a draft and shows it.
func (c *cli) draftCall(ctx context.Context, method, path string, body []byte) error {
	api, err := c.api()
	if err != nil {
		return err
	}
	var d automation.Draft
	raw, err := api.do(ctx, method, path, nil, body, &d)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(raw)
	}
	if err := c.fields("Flow", d.FlowID, "Based on", "version "+strconv.FormatInt(d.BasedOn, 10),
		"Updated", stamp(d.Updated), "Trigger", string(d.Trigger.Type)); err != nil {
		return err
	}
	if len(d.Steps) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	rows := make([][]string, len(d.Steps))
	for i, s := range d.Steps {
		rows[i] = []string{strconv.Itoa(i + 1), s.Name, string(s.Type)}
	}
	return c.rows([]string{"#", "STEP", "TYPE"}, rows)
}
