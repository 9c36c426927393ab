package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"flowservice/pkg/automation"
)

// approvalsCmd lists and decides APPROVAL steps (docs/flows.md, "A person
// in the loop"), as GET /api/v1/approvals and POST
// /api/v1/runs/{runId}/approvals/{step} do.
func (c *cli) approvalsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "approvals", Short: "Runs waiting on an APPROVAL step: list and decide (--url, --api-key)"}

	var lf listFlags
	var status string
	list := &cobra.Command{
		Use:   "list [--status PENDING|DECIDED] [--limit N] [--all]",
		Short: "List approvals, newest first (PENDING by default)",
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
			p, raw, err := fetchList[automation.ApprovalItem](cmd.Context(), api, "/api/v1/approvals", q, lf.all)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			rows := make([][]string, len(p.Data))
			for i, a := range p.Data {
				decision := a.Decision
				if decision == "" {
					decision = "-"
				}
				approved := 0
				for _, d := range a.Decisions {
					if d.Decision == automation.DecisionApproved {
						approved++
					}
				}
				rows[i] = []string{a.RunID, a.Step, a.FlowName, a.Title, a.Status, decision,
					strconv.Itoa(approved) + "/" + strconv.Itoa(a.Approvals), a.ExpiresAt.UTC().Format(time.RFC3339)}
			}
			if err := c.rows([]string{"RUN", "STEP", "FLOW", "TITLE", "STATUS", "DECISION", "APPROVED", "EXPIRES"}, rows); err != nil {
				return err
			}
			c.more(p.Cursor, p.HasMore)
			return nil
		},
	}
	list.Flags().StringVar(&status, "status", "", "PENDING (the default) or DECIDED")
	lf.add(list)

	var approve, reject bool
	var values string
	decide := &cobra.Command{
		Use:   "decide RUN_ID STEP --approve|--reject [--values JSON]",
		Short: "Approve or reject a run's APPROVAL step, as this key (or its person)",
		Long: `Approve or reject a run's APPROVAL step, with the form's values as a JSON object:

    flowctl approvals decide run_… approve_refund --approve --values '{"amount": 120}'

The first deciding answer wins; a later one fails with ALREADY_DECIDED and the decision recorded.`,
		Args: positional("decide RUN_ID STEP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if approve == reject {
				return errors.New("say --approve or --reject (one of them)")
			}
			in := automation.ApprovalAnswer{Decision: "approve"}
			if reject {
				in.Decision = "reject"
			}
			if values != "" {
				if err := json.Unmarshal([]byte(values), &in.Values); err != nil || in.Values == nil {
					return fmt.Errorf("--values: want a JSON object such as '{\"amount\": 120}'")
				}
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			body, err := json.Marshal(in)
			if err != nil {
				return err
			}
			var out struct {
				RunID, Step, Status, Decision string
				Decisions                     []automation.Decision
			}
			raw, err := api.do(cmd.Context(), http.MethodPost,
				"/api/v1/runs/"+url.PathEscape(args[0])+"/approvals/"+url.PathEscape(args[1]), nil, body, &out)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			decision := out.Decision
			if decision == "" {
				decision = fmt.Sprintf("- (%d answer(s) so far; more approvals needed)", len(out.Decisions))
			}
			return c.fields("Run", out.RunID, "Step", out.Step, "Status", out.Status, "Decision", decision)
		},
	}
	decide.Flags().BoolVar(&approve, "approve", false, "approve")
	decide.Flags().BoolVar(&reject, "reject", false, "reject")
	decide.Flags().StringVar(&values, "values", "", "the form's values, a JSON object")
	decide.MarkFlagsMutuallyExclusive("approve", "reject")

	cmd.AddCommand(list, decide)
	return cmd
}
