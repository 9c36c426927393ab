package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"flowservice/pkg/automation"
)

// variablesCmd manages project variables (docs/environments.md): what
// differs between installations, read by flows as vars.NAME.
func (c *cli) variablesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "variables", Short: "Project variables on a running server (--url, --api-key), read by flows as vars.NAME"}

	var lf listFlags
	list := &cobra.Command{
		Use:   "list [--limit N] [--all]",
		Short: "List variables by name; secret values are never shown",
		Args:  positional("list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			p, raw, err := fetchList[automation.Variable](cmd.Context(), api, "/api/v1/variables", lf.query(), lf.all)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			rows := make([][]string, len(p.Data))
			for i, v := range p.Data {
				rows[i] = variableRow(v)
			}
			if err := c.rows([]string{"NAME", "SECRET", "VALUE", "UPDATED"}, rows); err != nil {
				return err
			}
			c.more(p.Cursor, p.HasMore)
			return nil
		},
	}
	lf.add(list)

	var secret bool
	set := &cobra.Command{
		Use:   "set NAME [VALUE] [--secret]",
		Short: "Create or replace a variable; without VALUE the value is read from stdin (keep secrets out of shell history)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			value := ""
			if len(args) == 2 {
				value = args[1]
			} else {
				raw, err := io.ReadAll(io.LimitReader(c.stdin, automation.MaxVariableValueBytes+1))
				if err != nil {
					return fmt.Errorf("reading the value from stdin: %w", err)
				}
				value = strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
			}
			body, err := json.Marshal(automation.VariableInput{Value: &value, Secret: secret})
			if err != nil {
				return err
			}
			return c.variableCall(cmd.Context(), http.MethodPut, args[0], body)
		},
	}
	set.Flags().BoolVar(&secret, "secret", false, "keep the value write-only: never shown, masked in run records")

	get := &cobra.Command{
		Use: "get NAME", Short: "Show a variable (a secret one without its value)", Args: positional("get NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.variableCall(cmd.Context(), http.MethodGet, args[0], nil)
		},
	}
	cmd.AddCommand(list, set, get)
	cmd.AddCommand(c.commands(
		request{"delete NAME", "Delete a variable; runs that read it fail the step naming it", http.MethodDelete, "/api/v1/variables/%s", showDeleted},
	)...)
	return cmd
}

func (c *cli) variableCall(ctx context.Context, method, name string, body []byte) error {
	api, err := c.api()
	if err != nil {
		return err
	}
	var v automation.Variable
	raw, err := api.do(ctx, method, "/api/v1/variables/"+url.PathEscape(name), nil, body, &v)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(raw)
	}
	return c.rows([]string{"NAME", "SECRET", "VALUE", "UPDATED"}, [][]string{variableRow(v)})
}

func variableRow(v automation.Variable) []string {
	value := automation.SecretMask
	if v.Value != nil {
		value = *v.Value
	}
	return []string{v.Name, strconv.FormatBool(v.Secret), value, v.Updated.UTC().Format(automation.TimeFormat)}
}
