package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"flowservice/pkg/datadir"
)

// api returns a client of the server at --url with the key from --api-key,
// $FLOWCTL_API_KEY or the data directory's initial-api-key, in that order.
func (c *cli) api() (*client, error) {
	if c.output != "table" && c.output != "json" {
		return nil, fmt.Errorf("--output %q: allowed values are table, json", c.output)
	}
	key := c.apiKey
	if key == "" {
		key = os.Getenv("FLOWCTL_API_KEY")
	}
	if key == "" && isLoopback(c.url) {
		// The local data directory's key belongs to the local server: it
		// is never sent anywhere else.
		raw, err := os.ReadFile(filepath.Join(c.dataDir, datadir.InitialKeyFile))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("reading the initial API key: %w", err)
		}
		key = strings.TrimSpace(string(raw))
	}
	if key == "" {
		return nil, fmt.Errorf("no API key: pass --api-key, set FLOWCTL_API_KEY, or, for a flowd on this machine, point --data-dir at its data directory (no %s in %s)", datadir.InitialKeyFile, c.dataDir)
	}
	return newClient(c.url, key)
}

// isLoopback reports whether a server URL names this machine.
func isLoopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(u.Hostname())
	return err == nil && ip.IsLoopback()
}

// printJSON writes the API's JSON indented, as it came.
func (c *cli) printJSON(raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("the server's answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := c.stdout.Write(buf.Bytes())
	return err
}

// rows writes an aligned table.
func (c *cli) rows(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// fields writes "Name: value" lines, aligned.
func (c *cli) fields(kv ...string) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 1, ' ', 0)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[i], kv[i+1])
	}
	return tw.Flush()
}

// more tells, on stderr, that a table shows only the first page.
func (c *cli) more(cursor *string, hasMore bool) {
	if hasMore && cursor != nil {
		fmt.Fprintf(c.stderr, "(more: pass --all, or --cursor %s)\n", *cursor)
	}
}

// readDefinition reads a JSON document from a file, or stdin for "-".
func (c *cli) readDefinition(file string) ([]byte, error) {
	if file == "" {
		return nil, errors.New("-f FILE (or -f - for stdin) is required: a JSON flow definition")
	}
	var raw []byte
	var err error
	if file == "-" {
		raw, err = io.ReadAll(c.stdin)
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the definition: %w", err)
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("the definition in %s is not valid JSON", map[bool]string{true: "stdin", false: file}[file == "-"])
	}
	return raw, nil
}

// listFlags are the paging flags of list commands.
type listFlags struct {
	cmd    *cobra.Command
	limit  int
	cursor string
	all    bool
}

func (l *listFlags) add(cmd *cobra.Command) {
	l.cmd = cmd
	cmd.Flags().IntVar(&l.limit, "limit", 10, "page size, 1..100")
	cmd.Flags().StringVar(&l.cursor, "cursor", "", "start at this cursor, from a previous page")
	cmd.Flags().BoolVar(&l.all, "all", false, "follow the cursors and show every item")
}

func (l *listFlags) query() url.Values {
	q := url.Values{}
	if l.cmd.Flags().Changed("limit") {
		q.Set("limit", strconv.Itoa(l.limit))
	}
	if l.cursor != "" {
		q.Set("cursor", l.cursor)
	}
	return q
}

func esc(id string) string { return url.PathEscape(id) }

func (c *cli) flowsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "flows", Short: "Flows on a running server (--url, --api-key)"}

	var lf listFlags
	var status string
	list := &cobra.Command{
		Use:   "list [--status ACTIVE|INACTIVE] [--limit N] [--all]",
		Short: "List flows, in creation order",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			q := lf.query()
			if status != "" {
				q.Set("status", strings.ToUpper(status))
			}
			p, raw, err := fetchList[flow](cmd.Context(), api, "/api/v1/flows", q, lf.all)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			rows := make([][]string, len(p.Data))
			for i, f := range p.Data {
				rows[i] = []string{f.ID, f.Name, f.Status, f.Engine, f.TriggerType,
					strconv.Itoa(f.RunCount), rate(f), orDash(f.LastRun)}
			}
			if err := c.rows([]string{"ID", "NAME", "STATUS", "ENGINE", "TRIGGER", "RUNS", "SUCCESS", "LAST RUN"}, rows); err != nil {
				return err
			}
			c.more(p.Cursor, p.HasMore)
			return nil
		},
	}
	lf.add(list)
	list.Flags().StringVar(&status, "status", "", "only flows in this status: ACTIVE or INACTIVE")

	get := &cobra.Command{
		Use:   "get FLOW_ID",
		Short: "Show a flow with its trigger and steps",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.flowCall(cmd.Context(), http.MethodGet, "/api/v1/flows/"+esc(args[0]), nil)
		},
	}

	var createFile string
	create := &cobra.Command{
		Use:   "create -f FILE|-",
		Short: "Create a flow from a JSON definition (as POST /api/v1/flows takes); it starts INACTIVE",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := c.readDefinition(createFile)
			if err != nil {
				return err
			}
			return c.flowCall(cmd.Context(), http.MethodPost, "/api/v1/flows", body)
		},
	}
	create.Flags().StringVarP(&createFile, "file", "f", "", "JSON definition file, - for stdin")

	var updateFile string
	update := &cobra.Command{
		Use:   "update FLOW_ID -f FILE|-",
		Short: "Update a flow; fields the JSON leaves out keep their values",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := c.readDefinition(updateFile)
			if err != nil {
				return err
			}
			return c.flowCall(cmd.Context(), http.MethodPost, "/api/v1/flows/"+esc(args[0]), body)
		},
	}
	update.Flags().StringVarP(&updateFile, "file", "f", "", "JSON file with the fields to change, - for stdin")

	enable := &cobra.Command{
		Use:   "enable FLOW_ID",
		Short: "Activate a flow: its trigger starts runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.flowCall(cmd.Context(), http.MethodPost, "/api/v1/flows/"+esc(args[0])+"/enable", nil)
		},
	}
	disable := &cobra.Command{
		Use:   "disable FLOW_ID",
		Short: "Deactivate a flow: its webhook answers 404",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.flowCall(cmd.Context(), http.MethodPost, "/api/v1/flows/"+esc(args[0])+"/disable", nil)
		},
	}
	del := &cobra.Command{
		Use:   "delete FLOW_ID",
		Short: "Delete a flow and its run history (cannot be undone)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.deleteCall(cmd.Context(), "/api/v1/flows/"+esc(args[0]), args[0])
		},
	}
	webhook := &cobra.Command{
		Use:   "webhook FLOW_ID",
		Short: "Show the URL and method that start the flow",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			var d webhookDescriptor
			raw, err := api.do(cmd.Context(), http.MethodGet, "/api/v1/flows/"+esc(args[0])+"/webhook", nil, nil, &d)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			return c.rows([]string{"FLOW", "METHOD", "URL", "ENABLED"},
				[][]string{{d.FlowID, d.Method, d.WebhookURL, strconv.FormatBool(d.Enabled)}})
		},
	}
	cmd.AddCommand(list, get, create, update, enable, disable, del, webhook)
	return cmd
}

// flowCall sends a request answered with a flow and shows it.
func (c *cli) flowCall(ctx context.Context, method, path string, body []byte) error {
	api, err := c.api()
	if err != nil {
		return err
	}
	var f flow
	raw, err := api.do(ctx, method, path, nil, body, &f)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(raw)
	}
	trig := f.TriggerType
	if t := f.Trigger; t != nil && t.Webhook != nil {
		trig = strings.TrimSpace(fmt.Sprintf("%s %s %s %s", t.Type, t.Webhook.HTTPMethod, t.Webhook.Path, t.Webhook.ResponseMode))
	} else if t != nil && t.Schedule != nil {
		trig = fmt.Sprintf("%s %q %s", t.Type, t.Schedule.Cron, t.Schedule.Timezone)
	}
	if err := c.fields(
		"ID", f.ID, "Name", f.Name, "Status", f.Status, "Engine", f.Engine,
		"Description", orDash(&f.Description), "Trigger", trig,
		"Runs", strconv.Itoa(f.RunCount), "Success", rate(f), "Last run", orDash(f.LastRun),
		"Created", f.Created, "Updated", f.Updated,
	); err != nil {
		return err
	}
	if len(f.Steps) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	rows := make([][]string, len(f.Steps))
	for i, s := range f.Steps {
		rows[i] = []string{strconv.Itoa(i + 1), s.Name, s.Type}
	}
	return c.rows([]string{"#", "STEP", "TYPE"}, rows)
}

// deleteCall deletes a resource; the API answers 204 without a body, so
// -o json prints nothing.
func (c *cli) deleteCall(ctx context.Context, path, id string) error {
	api, err := c.api()
	if err != nil {
		return err
	}
	if _, err := api.do(ctx, http.MethodDelete, path, nil, nil, nil); err != nil {
		return err
	}
	if c.output == "json" {
		return nil
	}
	_, err = fmt.Fprintln(c.stdout, "deleted", id)
	return err
}

func (c *cli) runsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "runs", Short: "A flow's runs on a running server (--url, --api-key)"}

	var lf listFlags
	var status string
	list := &cobra.Command{
		Use:   "list FLOW_ID [--status S] [--limit N] [--all]",
		Short: "List a flow's runs, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			q := lf.query()
			if status != "" {
				q.Set("status", strings.ToUpper(status))
			}
			p, raw, err := fetchList[run](cmd.Context(), api, "/api/v1/flows/"+esc(args[0])+"/runs", q, lf.all)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			rows := make([][]string, len(p.Data))
			for i, r := range p.Data {
				rows[i] = []string{r.ID, r.Status, r.Created, duration(r.DurationMs),
					strconv.Itoa(r.Attempts), clip(r.Error, 60)}
			}
			if err := c.rows([]string{"ID", "STATUS", "CREATED", "DURATION", "ATTEMPTS", "ERROR"}, rows); err != nil {
				return err
			}
			c.more(p.Cursor, p.HasMore)
			return nil
		},
	}
	lf.add(list)
	list.Flags().StringVar(&status, "status", "", "only runs in this status: RUNNING, SUCCEEDED, FAILED or TIMEOUT")

	get := &cobra.Command{
		Use:   "get FLOW_ID RUN_ID",
		Short: "Show a run and each step's status, duration and error",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.runCall(cmd.Context(), http.MethodGet, "/api/v1/flows/"+esc(args[0])+"/runs/"+esc(args[1]))
		},
	}
	retry := &cobra.Command{
		Use:   "retry FLOW_ID RUN_ID",
		Short: "Start a new run with the same trigger data",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.runCall(cmd.Context(), http.MethodPost, "/api/v1/flows/"+esc(args[0])+"/runs/"+esc(args[1])+"/retry")
		},
	}
	cmd.AddCommand(list, get, retry)
	return cmd
}

// runCall sends a request answered with a run and shows it.
func (c *cli) runCall(ctx context.Context, method, path string) error {
	api, err := c.api()
	if err != nil {
		return err
	}
	var r run
	raw, err := api.do(ctx, method, path, nil, nil, &r)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(raw)
	}
	if err := c.fields(
		"ID", r.ID, "Flow", r.FlowID, "Status", r.Status, "Created", r.Created,
		"Started", orDash(r.Started), "Finished", orDash(r.Finished),
		"Duration", duration(r.DurationMs), "Attempts", strconv.Itoa(r.Attempts),
		"Error", orDash(&r.Error),
	); err != nil {
		return err
	}
	if len(r.Steps) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	rows := make([][]string, len(r.Steps))
	for i, s := range r.Steps {
		rows[i] = []string{s.Name, s.Type, s.Status, duration(s.DurationMs), orDash(&s.Error)}
	}
	return c.rows([]string{"STEP", "TYPE", "STATUS", "DURATION", "ERROR"}, rows)
}

func (c *cli) connectionsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "connections", Short: "Stored credentials on a running server (--url, --api-key)"}

	var lf listFlags
	list := &cobra.Command{
		Use:   "list [--limit N] [--all]",
		Short: "List connections (never their keys)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			p, raw, err := fetchList[connection](cmd.Context(), api, "/api/v1/connections", lf.query(), lf.all)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			if err := c.rows([]string{"ID", "NAME", "APP", "TYPE", "STATUS", "CREATED"}, connRows(p.Data...)); err != nil {
				return err
			}
			c.more(p.Cursor, p.HasMore)
			return nil
		},
	}
	lf.add(list)

	var name, app, header, prefix string
	var fromStdin bool
	create := &cobra.Command{
		Use:   "create --name N --app A --api-key-stdin",
		Short: "Create an API key connection; the external key is read from stdin",
		Long: `Create an API key connection. The external service's key is read from
stdin (a trailing newline is dropped), so that it never lands in shell history or in ps:

    flowctl connections create --name "Chat bot" --app chat --api-key-stdin < chat.key

It is stored encrypted and never shown again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !fromStdin {
				return errors.New("--api-key-stdin is required: the connection's key is read from stdin, never from the command line")
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			raw, err := io.ReadAll(io.LimitReader(c.stdin, 1<<20))
			if err != nil {
				return fmt.Errorf("reading the connection's key from stdin: %w", err)
			}
			key := strings.TrimRight(string(raw), "\r\n")
			if strings.TrimSpace(key) == "" {
				return errors.New("stdin held no key: pipe the external service's key into --api-key-stdin")
			}
			value := map[string]string{"apiKey": key}
			if header != "" {
				value["header"] = header
			}
			if cmd.Flags().Changed("prefix") {
				value["prefix"] = prefix
			}
			body, err := json.Marshal(map[string]any{"name": name, "app": app, "type": "API_KEY", "value": value})
			if err != nil {
				return err
			}
			var con connection
			out, err := api.do(cmd.Context(), http.MethodPost, "/api/v1/connections", nil, body, &con)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(out)
			}
			return c.rows([]string{"ID", "NAME", "APP", "TYPE", "STATUS", "CREATED"}, connRows(con))
		},
	}
	create.Flags().StringVar(&name, "name", "", "connection name (required)")
	create.Flags().StringVar(&app, "app", "", "the external service, e.g. github (required)")
	create.Flags().BoolVar(&fromStdin, "api-key-stdin", false, "read the external service's key from stdin (required)")
	create.Flags().StringVar(&header, "header", "", "header HTTP steps send the key in (server default Authorization)")
	create.Flags().StringVar(&prefix, "prefix", "", `text before the key in that header (server default "Bearer ")`)
	_ = create.MarkFlagRequired("name")
	_ = create.MarkFlagRequired("app")

	del := &cobra.Command{
		Use:   "delete CONNECTION_ID",
		Short: "Delete a connection; its key is revoked at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.deleteCall(cmd.Context(), "/api/v1/connections/"+esc(args[0]), args[0])
		},
	}
	cmd.AddCommand(list, create, del)
	return cmd
}

func connRows(cs ...connection) [][]string {
	rows := make([][]string, len(cs))
	for i, k := range cs {
		rows[i] = []string{k.ID, k.Name, k.App, k.Type, k.Status, k.Created}
	}
	return rows
}

func rate(f flow) string {
	if f.RunCount == 0 {
		return "-"
	}
	return strconv.FormatFloat(f.SuccessRate, 'f', 1, 64) + "%"
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return oneLine(*s)
}

func duration(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return (time.Duration(*ms) * time.Millisecond).String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clip(s string, n int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}
