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

	"flowservice/pkg/automation"
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
		where := map[bool]string{true: "stdin", false: file}[file == "-"]
		var v any
		var syn *json.SyntaxError
		if err := json.Unmarshal(raw, &v); errors.As(err, &syn) {
			line, col := automation.JSONPosition(raw, syn.Offset)
			return nil, fmt.Errorf("the definition in %s is not valid JSON: %s:%d:%d: %s", where, where, line, col, syn.Error())
		}
		return nil, fmt.Errorf("the definition in %s is not valid JSON: it ends before its value does (a missing } or ]?)", where)
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

// request is a command that names resources by ID and sends one request:
// most of flowctl's remote commands. path is a fmt pattern with one %s per
// argument of use (escaped); show presents the answer.
type request struct {
	use, short, method, path string
	show                     func(c *cli, ctx context.Context, method, path string, args []string) error
}

// commands builds the commands of a table of requests.
func (c *cli) commands(rs ...request) []*cobra.Command {
	out := make([]*cobra.Command, len(rs))
	for i, r := range rs {
		out[i] = &cobra.Command{
			Use: r.use, Short: r.short, Args: positional(r.use),
			RunE: func(cmd *cobra.Command, args []string) error {
				esc := make([]any, len(args))
				for i, a := range args {
					esc[i] = url.PathEscape(a)
				}
				return r.show(c, cmd.Context(), r.method, fmt.Sprintf(r.path, esc...), args)
			},
		}
	}
	return out
}

// positional accepts exactly the arguments named in use (the upper-case
// words, such as FLOW_ID, that are not a flag's value), and names the
// missing one when one is missing, where cobra would only count them.
func positional(use string) cobra.PositionalArgs {
	var names []string
	words := strings.Fields(use)
	for i, w := range words {
		if i == 0 || strings.HasPrefix(words[i-1], "-") || strings.HasPrefix(words[i-1], "[") {
			continue // the command's name, or a flag's value
		}
		if w == strings.ToUpper(w) && !strings.ContainsAny(w, "-[]|") {
			names = append(names, w)
		}
	}
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return fmt.Errorf("missing %s (usage: %s)", strings.Join(names[len(args):], " and "), cmd.UseLine())
		case len(args) > len(names) && len(names) == 0:
			return fmt.Errorf("unexpected argument %q: %s takes flags only (usage: %s)", args[0], cmd.CommandPath(), cmd.UseLine())
		case len(args) > len(names):
			return fmt.Errorf("unexpected argument %q after %s (usage: %s)", args[len(names)], strings.Join(names, " "), cmd.UseLine())
		}
		return nil
	}
}

func (c *cli) flowsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "flows", Short: "Flows on a running server (--url, --api-key)"}

	var lf listFlags
	var status string
	list := &cobra.Command{
		Use:   "list [--status ACTIVE|INACTIVE] [--limit N] [--all]",
		Short: "List flows, in creation order",
		Args:  positional("list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			q := lf.query()
			if status != "" {
				q.Set("status", strings.ToUpper(status))
			}
			p, raw, err := fetchList[automation.FlowSummary](cmd.Context(), api, "/api/v1/flows", q, lf.all)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			rows := make([][]string, len(p.Data))
			for i, f := range p.Data {
				draft := "-"
				if f.HasDraft {
					draft = "draft"
				}
				rows[i] = []string{f.ID, f.Name, string(f.Status), string(f.Engine), string(f.TriggerType),
					strconv.FormatInt(f.RunCount, 10), rate(f.RunCount, f.SuccessRate), stampOrDash(f.LastRun),
					strconv.FormatInt(f.Version, 10), draft}
			}
			if err := c.rows([]string{"ID", "NAME", "STATUS", "ENGINE", "TRIGGER", "RUNS", "SUCCESS", "LAST RUN", "VERSION", "DRAFT"}, rows); err != nil {
				return err
			}
			c.more(p.Cursor, p.HasMore)
			return nil
		},
	}
	lf.add(list)
	list.Flags().StringVar(&status, "status", "", "only flows in this status: ACTIVE or INACTIVE")

	var createFile string
	create := &cobra.Command{
		Use:   "create -f FILE|-",
		Short: "Create a flow from a JSON definition (as POST /api/v1/flows takes); it starts INACTIVE",
		Args:  positional("create"),
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
		Args:  positional("update FLOW_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := c.readDefinition(updateFile)
			if err != nil {
				return err
			}
			return c.flowCall(cmd.Context(), http.MethodPost, "/api/v1/flows/"+url.PathEscape(args[0]), body)
		},
	}
	update.Flags().StringVarP(&updateFile, "file", "f", "", "JSON file with the fields to change, - for stdin")

	cmd.AddCommand(list, create, update)
	cmd.AddCommand(c.commands(
		request{"get FLOW_ID", "Show a flow with its trigger and steps", http.MethodGet, "/api/v1/flows/%s", showFlow},
		request{"enable FLOW_ID", "Activate a flow: its trigger starts runs", http.MethodPost, "/api/v1/flows/%s/enable", showFlow},
		request{"disable FLOW_ID", "Deactivate a flow: its webhook answers 404", http.MethodPost, "/api/v1/flows/%s/disable", showFlow},
		request{"delete FLOW_ID", "Delete a flow and its run history (cannot be undone)", http.MethodDelete, "/api/v1/flows/%s", showDeleted},
		request{"webhook FLOW_ID", "Show the URL and method that start the flow", http.MethodGet, "/api/v1/flows/%s/webhook", showWebhook},
	)...)
	cmd.AddCommand(c.versionCommands()...) // versions.go
	return cmd
}

func showFlow(c *cli, ctx context.Context, method, path string, _ []string) error {
	return c.flowCall(ctx, method, path, nil)
}

func showRun(c *cli, ctx context.Context, method, path string, _ []string) error {
	return c.runCall(ctx, method, path, nil)
}

// showDeleted deletes a resource; the API answers 204 without a body, so
// -o json prints nothing.
func showDeleted(c *cli, ctx context.Context, method, path string, args []string) error {
	api, err := c.api()
	if err != nil {
		return err
	}
	if _, err := api.do(ctx, method, path, nil, nil, nil); err != nil {
		return err
	}
	if c.output == "json" {
		return nil
	}
	_, err = fmt.Fprintln(c.stdout, "deleted", args[len(args)-1])
	return err
}

func showWebhook(c *cli, ctx context.Context, method, path string, _ []string) error {
	api, err := c.api()
	if err != nil {
		return err
	}
	var d automation.WebhookDescriptor
	raw, err := api.do(ctx, method, path, nil, nil, &d)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(raw)
	}
	return c.rows([]string{"FLOW", "METHOD", "URL", "ENABLED"},
		[][]string{{d.FlowID, d.Method, d.WebhookURL, strconv.FormatBool(d.Enabled)}})
}

// flowCall sends a request answered with a flow and shows it.
func (c *cli) flowCall(ctx context.Context, method, path string, body []byte) error {
	api, err := c.api()
	if err != nil {
		return err
	}
	var f automation.Flow
	raw, err := api.do(ctx, method, path, nil, body, &f)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(raw)
	}
	trig := string(f.TriggerType)
	if t := f.Trigger; t.Webhook != nil {
		trig = strings.TrimSpace(fmt.Sprintf("%s %s %s %s", t.Type, t.Webhook.HTTPMethod, t.Webhook.Path, t.Webhook.ResponseMode))
	} else if t.Schedule != nil {
		trig = fmt.Sprintf("%s %q %s", t.Type, t.Schedule.Cron, t.Schedule.Timezone)
	}
	if err := c.fields(
		"ID", f.ID, "Name", f.Name, "Status", string(f.Status), "Engine", string(f.Engine),
		"Description", orDash(&f.Description), "Trigger", trig,
		"Version", strconv.FormatInt(f.LiveVersion, 10), "Draft", strconv.FormatBool(f.HasDraft),
		"Runs", strconv.FormatInt(f.RunCount, 10), "Success", rate(f.RunCount, f.SuccessRate), "Last run", stampOrDash(f.LastRun),
		"Created", stamp(f.Created), "Updated", stamp(f.Updated),
	); err != nil {
		return err
	}
	if len(f.Steps) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	rows := make([][]string, len(f.Steps))
	for i, s := range f.Steps {
		rows[i] = []string{strconv.Itoa(i + 1), s.Name, string(s.Type)}
	}
	return c.rows([]string{"#", "STEP", "TYPE"}, rows)
}

func (c *cli) runsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "runs", Short: "A flow's runs on a running server (--url, --api-key)"}

	var lf listFlags
	var status string
	list := &cobra.Command{
		Use:   "list FLOW_ID [--status S] [--limit N] [--all]",
		Short: "List a flow's runs, newest first",
		Args:  positional("list FLOW_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			q := lf.query()
			if status != "" {
				q.Set("status", strings.ToUpper(status))
			}
			p, raw, err := fetchList[automation.Run](cmd.Context(), api, "/api/v1/flows/"+url.PathEscape(args[0])+"/runs", q, lf.all)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			rows := make([][]string, len(p.Data))
			for i, r := range p.Data {
				rows[i] = []string{r.ID, string(r.Status), waiting(r.WaitingFor), stamp(r.Created), duration(r.DurationMs),
					strconv.Itoa(r.Attempts), clip(r.Error, 60)}
			}
			if err := c.rows([]string{"ID", "STATUS", "WAITING FOR", "CREATED", "DURATION", "ATTEMPTS", "ERROR"}, rows); err != nil {
				return err
			}
			c.more(p.Cursor, p.HasMore)
			return nil
		},
	}
	lf.add(list)
	list.Flags().StringVar(&status, "status", "", "only runs in this status: RUNNING, SUCCEEDED, FAILED or TIMEOUT")

	var from string
	retry := &cobra.Command{
		Use:   "retry FLOW_ID RUN_ID [--from START|FAILED_STEP]",
		Short: "Start a new run with the same trigger data, from the start or resuming at the failed step",
		Args:  positional("retry FLOW_ID RUN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := json.Marshal(automation.RetryRequest{From: strings.ToUpper(from)})
			if err != nil {
				return err
			}
			path := fmt.Sprintf("/api/v1/flows/%s/runs/%s/retry", url.PathEscape(args[0]), url.PathEscape(args[1]))
			return c.runCall(cmd.Context(), http.MethodPost, path, body)
		},
	}
	retry.Flags().StringVar(&from, "from", automation.RetryFromStart,
		"START: a new run from the first step; FAILED_STEP: reuse the steps that succeeded and start at the one that failed")

	cmd.AddCommand(list, retry)
	cmd.AddCommand(c.commands(
		request{"get FLOW_ID RUN_ID", "Show a run and each step's status, attempts, duration and error", http.MethodGet, "/api/v1/flows/%s/runs/%s", showRun},
	)...)
	return cmd
}

// runCall sends a request answered with a run and shows it.
func (c *cli) runCall(ctx context.Context, method, path string, body []byte) error {
	api, err := c.api()
	if err != nil {
		return err
	}
	var r automation.Run
	raw, err := api.do(ctx, method, path, nil, body, &r)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(raw)
	}
	if err := c.fields(
		"ID", r.ID, "Flow", r.FlowID, "Status", string(r.Status), "Waiting for", waiting(r.WaitingFor), "Created", stamp(r.Created),
		"Started", stampOrDash(r.Started), "Finished", stampOrDash(r.Finished),
		"Duration", duration(r.DurationMs), "Attempts", strconv.Itoa(r.Attempts),
		"Next attempt", stampOrDash(r.NextAttemptAt), "Resumed from", orDash(&r.ResumedFrom),
		"Stopped at", orDash(&r.StoppedAt), "Error", orDash(&r.Error),
	); err != nil {
		return err
	}
	if len(r.Steps) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	header := []string{"STEP", "TYPE", "STATUS", "ATTEMPTS", "DURATION", "ERROR"}
	if err := c.rows(header, stepRows(r.Steps, "")); err != nil {
		return err
	}
	if len(r.OnErrorSteps) > 0 {
		fmt.Fprintln(c.stdout, "\nonError:")
		if err := c.rows(header, stepRows(r.OnErrorSteps, "")); err != nil {
			return err
		}
	}
	c.printLogs(append(r.Steps, r.OnErrorSteps...), "")
	return nil
}

// stepRows lays out step results as table rows, nested steps indented
// under their SWITCH, and a FOR_EACH's items as "[i]" rows with their
// steps under them.
func stepRows(steps []automation.StepResult, indent string) [][]string {
	var rows [][]string
	for _, s := range steps {
		ms := s.DurationMs
		rows = append(rows, []string{indent + s.Name, string(s.Type), string(s.Status), strconv.Itoa(s.Attempts), duration(&ms), orDash(&s.Error)})
		rows = append(rows, stepRows(s.Steps, indent+"  ")...)
		for _, it := range s.Iterations {
			rows = append(rows, []string{fmt.Sprintf("%s  [%d]", indent, it.Index), "item", string(it.Status), "-", "-", orDash(&it.Error)})
			rows = append(rows, stepRows(it.Steps, indent+"    ")...)
		}
	}
	return rows
}

// printLogs shows the console lines of CODE steps, nested ones included.
func (c *cli) printLogs(steps []automation.StepResult, where string) {
	for _, s := range steps {
		if len(s.Logs) > 0 {
			fmt.Fprintf(c.stdout, "\nlogs of %s%s:\n", s.Name, where)
			for _, l := range s.Logs {
				fmt.Fprintln(c.stdout, "  "+l)
			}
		}
		c.printLogs(s.Steps, where)
		for _, it := range s.Iterations {
			c.printLogs(it.Steps, fmt.Sprintf("%s (item %d)", where, it.Index))
		}
	}
}

func (c *cli) connectionsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "connections", Short: "Stored credentials on a running server (--url, --api-key)"}

	var lf listFlags
	list := &cobra.Command{
		Use:   "list [--limit N] [--all]",
		Short: "List connections (never their keys)",
		Args:  positional("list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			p, raw, err := fetchList[automation.Connection](cmd.Context(), api, "/api/v1/connections", lf.query(), lf.all)
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
	var typ, username, queryParam, allowedHosts string
	var fromStdin bool
	create := &cobra.Command{
		Use:   "create --name N --app A [--type T] --api-key-stdin",
		Short: "Create a connection; its secret (key, password or value) is read from stdin",
		Long: `Create an API key connection. The external service's key is read from
stdin (a trailing newline is dropped), so that it never lands in shell history or in ps:

    flowctl connections create --name "Chat bot" --app chat --api-key-stdin < chat.key

It is stored encrypted and never shown again. Other types read their secret
from stdin the same way: --type BASIC --username U (the password), --type HEADER
--header NAME (the header's value), --type QUERY --query-param NAME (the
parameter's value). --allowed-hosts api.example.com,*.example.org fences the
credential to those hosts (docs/access.md).`,
		Args: positional("create"),
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
			value := connectionValue(typ, key, header, prefix, cmd.Flags().Changed("prefix"), username, queryParam)
			req := map[string]any{"name": name, "app": app, "type": strings.ToUpper(typ), "value": value}
			if hosts := splitList(allowedHosts); len(hosts) > 0 {
				req["allowedHosts"] = hosts
			}
			body, err := json.Marshal(req)
			if err != nil {
				return err
			}
			var con automation.Connection
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
	create.Flags().StringVar(&typ, "type", string(automation.ConnectionAPIKey), "API_KEY, BASIC, HEADER or QUERY")
	create.Flags().StringVar(&username, "username", "", "BASIC: the user name (the password comes from stdin)")
	create.Flags().StringVar(&queryParam, "query-param", "", "QUERY: the query parameter that carries the value")
	create.Flags().StringVar(&allowedHosts, "allowed-hosts", "", "comma-separated hosts the credential may be sent to, e.g. api.stripe.com,*.slack.com")
	_ = create.MarkFlagRequired("name")
	_ = create.MarkFlagRequired("app")

	cmd.AddCommand(list, create)
	cmd.AddCommand(c.commands(
		request{"delete CONNECTION_ID", "Delete a connection; its key is revoked at once", http.MethodDelete, "/api/v1/connections/%s", showDeleted},
	)...)
	return cmd
}

func connRows(cs ...automation.Connection) [][]string {
	rows := make([][]string, len(cs))
	for i, k := range cs {
		rows[i] = []string{k.ID, k.Name, k.App, string(k.Type), string(k.Status), stamp(k.Created)}
	}
	return rows
}

// rate is a flow's success rate; "-" before its first finished run (the
// API's null), never "0.0%".
func rate(runCount int64, rate float64) string {
	if runCount == 0 {
		return "-"
	}
	return strconv.FormatFloat(rate, 'f', 1, 64) + "%"
}

// stamp shows a time as the API writes it.
func stamp(t time.Time) string { return t.UTC().Format(automation.TimeFormat) }

func stampOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return stamp(*t)
}

// waiting shows why a RUNNING run is not executing (CONCURRENCY,
// THROTTLE, QUOTA, WAIT, RETRY), "-" when it executes or is final.
func waiting(w automation.WaitReason) string {
	if w == "" {
		return "-"
	}
	return string(w)
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
