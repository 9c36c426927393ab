package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"flowservice/pkg/alerts"
)

// subscriptionsCmd manages event subscriptions (docs/alerts.md).
func (c *cli) subscriptionsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "subscriptions", Short: "Event subscriptions: alerts of failed runs and flow changes (--url, --api-key)"}

	list := &cobra.Command{
		Use: "list", Short: "List subscriptions (never their secrets)", Args: positional("list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			var p page[alerts.Subscription]
			raw, err := api.do(cmd.Context(), http.MethodGet, "/api/v1/subscriptions", nil, nil, &p)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			return c.rows([]string{"ID", "STATUS", "EVENTS", "FLOW", "URL"}, subRows(p.Data...))
		},
	}

	var target, flowID, description string
	var events []string
	create := &cobra.Command{
		Use:   "create --target URL --event TYPE [--event TYPE...] [--flow FLOW_ID]",
		Short: "Subscribe a URL to events; prints the signing secret, this once",
		Long: `Subscribe a URL to events of the project, or of one flow with --flow:

    flowctl subscriptions create --target https://hooks.example.com/flows --event run.failed --event run.timeout

Events: ` + strings.Join(alerts.EventTypes, ", ") + `.
Deliveries are signed per Standard Webhooks with the whsec_ secret printed now and never again.`,
		Args: positional("create"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			in := alerts.Input{URL: target, Events: events, Description: description}
			if flowID != "" {
				in.FlowID = &flowID
			}
			body, err := json.Marshal(in)
			if err != nil {
				return err
			}
			var created alerts.Created
			raw, err := api.do(cmd.Context(), http.MethodPost, "/api/v1/subscriptions", nil, body, &created)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			if err := c.fields("ID", created.ID, "Status", created.Status, "Events", strings.Join(created.Events, ","),
				"URL", created.URL, "Secret", created.Secret); err != nil {
				return err
			}
			_, err = fmt.Fprintln(c.stderr, "(the secret is shown only now: store it where the receiver verifies signatures)")
			return err
		},
	}
	create.Flags().StringVar(&target, "target", "", "the URL that receives the events (required)")
	create.Flags().StringArrayVar(&events, "event", nil, "an event type, repeatable (required)")
	create.Flags().StringVar(&flowID, "flow", "", "only events of this flow")
	create.Flags().StringVar(&description, "description", "", "a note for people")
	_ = create.MarkFlagRequired("target")
	_ = create.MarkFlagRequired("event")

	var limit int
	deliveries := &cobra.Command{
		Use: "deliveries SUBSCRIPTION_ID [--limit N]", Short: "The subscription's latest deliveries and their attempts",
		Args: positional("deliveries SUBSCRIPTION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			var p page[alerts.Delivery]
			raw, err := api.do(cmd.Context(), http.MethodGet, "/api/v1/subscriptions/"+url.PathEscape(args[0])+"/deliveries", q, nil, &p)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(raw)
			}
			rows := make([][]string, len(p.Data))
			for i, d := range p.Data {
				code := "-"
				if d.LastStatusCode != nil {
					code = strconv.Itoa(*d.LastStatusCode)
				}
				rows[i] = []string{d.ID, d.EventType, d.Status, strconv.Itoa(d.Attempts), code, stampOrDash(d.NextAttemptAt), d.EventID}
			}
			return c.rows([]string{"ID", "EVENT", "STATUS", "ATTEMPTS", "LAST CODE", "NEXT ATTEMPT", "WEBHOOK-ID"}, rows)
		},
	}
	deliveries.Flags().IntVar(&limit, "limit", 10, "how many, 1..100")

	cmd.AddCommand(list, create, deliveries)
	cmd.AddCommand(c.commands(
		request{"delete SUBSCRIPTION_ID", "Delete a subscription and its deliveries", http.MethodDelete, "/api/v1/subscriptions/%s", showDeleted},
		request{"test SUBSCRIPTION_ID", "Send a ping event to the subscription", http.MethodPost, "/api/v1/subscriptions/%s/test", showQueued},
		request{"enable SUBSCRIPTION_ID", "Make a DISABLED subscription ACTIVE again", http.MethodPost, "/api/v1/subscriptions/%s/enable", showSubscription},
	)...)
	return cmd
}

func subRows(subs ...alerts.Subscription) [][]string {
	rows := make([][]string, len(subs))
	for i, s := range subs {
		rows[i] = []string{s.ID, s.Status, strings.Join(s.Events, ","), orDash(s.FlowID), s.URL}
	}
	return rows
}

func showQueued(c *cli, ctx context.Context, method, path string, _ []string) error {
	api, err := c.api()
	if err != nil {
		return err
	}
	var q alerts.Queued
	raw, err := api.do(ctx, method, path, nil, nil, &q)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(raw)
	}
	return c.fields("Queued ping", q.EventID, "Delivery", q.DeliveryID)
}

func showSubscription(c *cli, ctx context.Context, method, path string, _ []string) error {
	api, err := c.api()
	if err != nil {
		return err
	}
	var s alerts.Subscription
	raw, err := api.do(ctx, method, path, nil, nil, &s)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(raw)
	}
	return c.rows([]string{"ID", "STATUS", "EVENTS", "FLOW", "URL"}, subRows(s))
}
