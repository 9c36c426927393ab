package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"flowservice/pkg/automation"
)

// setLimitsCmd is `flowctl projects set-limits NAME --KEY VALUE…`: it
// overrides the plan's limits of one project. A value is a whole number,
// "unlimited", or "default" to go back to the plan's.
func (c *cli) setLimitsCmd() *cobra.Command {
	values := map[string]*string{}
	cmd := &cobra.Command{
		Use:   "set-limits NAME --LIMIT VALUE...",
		Short: "Override a project's plan limits (a number, unlimited, or default)",
		Long: "Override a project's plan limits. Limits: " + strings.Join(automation.LimitNames, ", ") +
			". A value is a whole number, \"unlimited\", or \"default\" (the plan's again).",
		Args: positional("set-limits NAME"),
		RunE: c.withService(func(ctx context.Context, svc *automation.Service, args []string) error {
			set, unset := map[string]int64{}, []string(nil)
			for _, name := range automation.LimitNames {
				if *values[name] == "" {
					continue
				}
				v, ok, err := automation.ParseLimit(name, *values[name])
				if err != nil {
					return err
				}
				if ok {
					set[name] = v
				} else {
					unset = append(unset, name)
				}
			}
			if len(set)+len(unset) == 0 {
				return fmt.Errorf("set-limits: give at least one of --%s", strings.Join(automation.LimitNames, ", --"))
			}
			p, err := svc.SetProjectLimits(ctx, args[0], set, unset)
			if err != nil {
				return err
			}
			return c.showLimits(p)
		}),
	}
	for _, name := range automation.LimitNames {
		values[name] = cmd.Flags().String(name, "", "a whole number, unlimited, or default")
	}
	return cmd
}

func (c *cli) showLimits(p automation.Project) error {
	l := p.Limits()
	if c.output == "json" {
		return c.json(map[string]any{"id": p.ID, "name": p.Name, "plan": p.Plan, "limits": l})
	}
	fmt.Fprintf(c.stdout, "%s (%s)\n", p.Name, p.Plan)
	show := func(name string, v *int64) {
		s := "unlimited"
		if v != nil {
			s = fmt.Sprint(*v)
		}
		mark := ""
		if _, ok := p.LimitOverrides[name]; ok {
			mark = " (override)"
		}
		fmt.Fprintf(c.stdout, "  %-18s %s%s\n", name, s, mark)
	}
	show("webhooksPerSecond", l.WebhooksPerSecond)
	show("concurrentRuns", l.ConcurrentRuns)
	show("outboundPerMinute", l.OutboundPerMinute)
	show("flows", l.Flows)
	show("storedBytes", l.StoredBytes)
	show("runsPerMinute", l.RunsPerMinute)
	return nil
}
