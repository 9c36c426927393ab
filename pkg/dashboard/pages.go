package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"flowservice/pkg/automation"
)

// notices are the confirmations a redirect after a form may ask for; only
// these fixed texts are shown.
var notices = map[string]string{
	"enabled":     "Flow enabled: its trigger fires now.",
	"disabled":    "Flow disabled: its trigger no longer fires.",
	"allowlist":   "IP allowlist saved.",
	"created":     "Connection created. Its key is stored and will not be shown again.",
	"deleted":     "Connection deleted. Flows that use it fail from their next run.",
	"connected":   "Connected. The tokens are stored encrypted and refreshed before use.",
	"flowcreated": "Flow created. It is INACTIVE until you enable it.",
	"flowsaved":   "Flow saved.",
	"flowdeleted": "Flow deleted, with its run history.",
	"retried":     "Retry started: a new run with the same trigger data, from the first step.",
	"resumed":     "Retry started: a new run that reuses the steps that succeeded and starts at the one that failed.",
	"testsent":    "Test event sent through the test URL: this is the run it started.",
	"keyrevoked":  "Key revoked: requests and sessions made with it are refused from now on.",
	"cancelled":   "Run cancelled: it ended FAILED (CANCELLED) and will not go on.",
	"approved":    "Approved: the run goes on once the approvals it needs are in.",
	"rejected":    "Rejected: the run goes on with the decision rejected.",
}

func notice(r *http.Request) string { return notices[r.URL.Query().Get("done")] }

func project(r *http.Request) automation.Project { return sessionOf(r.Context()).project }

// pager is the state of a paged list: the filter in force and the link to
// the next page.
type pager struct {
	Status   string
	Statuses []string
	Next     string // cursor of the next page, "" on the last
	Paged    bool   // a cursor is in force: offer the first page
}

func newPager(r *http.Request, statuses []string, next *string) pager {
	p := pager{Status: r.URL.Query().Get("status"), Statuses: statuses, Paged: r.URL.Query().Get("cursor") != ""}
	if next != nil {
		p.Next = *next
	}
	return p
}

func pageRequest(r *http.Request) automation.PageRequest {
	q := r.URL.Query()
	return automation.PageRequest{Cursor: q.Get("cursor"), Status: q.Get("status")}
}

// flowsPageSize is how many flows a page of the list shows.
const flowsPageSize = 25

// flowList is the flow list page: the search in force and one page of
// what it found.
type flowList struct {
	automation.FlowSearchResult
	Query, Status string
	Statuses      []string
	Sorts         []flowSortLink
	Prev, Next    string // query strings of the neighbouring pages, "" for none
}

// flowSortLink is a column heading that sorts by it: by the other
// direction when it is the sort in force.
type flowSortLink struct {
	Key, Label, Href, Arrow string
}

// flows is the list of the project's flows: searched by name, filtered by
// status and sorted on the server (automation.FlowService.SearchFlows), a
// GET form and links, so it works without script.
func (d *Dashboard) flows(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page := 1
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			d.fail(w, r, automation.InvalidCode("INVALID_PARAMETER", "page must be a whole number from 1, got %q", automation.ClipID(v)))
			return
		}
		page = n
	}
	in := automation.FlowSearch{Name: q.Get("q"), Status: q.Get("status"), Sort: q.Get("sort"), Order: q.Get("order"),
		Page: page, Limit: flowsPageSize}
	res, err := d.svc.SearchFlows(r.Context(), project(r), in)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	l := flowList{FlowSearchResult: res, Query: in.Name, Status: in.Status,
		Statuses: []string{string(automation.FlowActive), string(automation.FlowInactive)}}
	link := func(sort, order string, page int) string {
		v := url.Values{}
		if in.Name != "" {
			v.Set("q", in.Name)
		}
		if in.Status != "" {
			v.Set("status", in.Status)
		}
		v.Set("sort", sort)
		if order != "" { // "": the sort's own default direction
			v.Set("order", order)
		}
		if page > 1 {
			v.Set("page", strconv.Itoa(page))
		}
		return "?" + v.Encode()
	}
	for _, s := range []struct{ key, label string }{
		{"name", "Name"}, {"lastRun", "Last run"}, {"successRate", "Success"}, {"created", "Created"},
	} {
		sl := flowSortLink{Key: s.key, Label: s.label, Href: link(s.key, "", 1)}
		if s.key == res.Sort {
			other, arrow := "desc", "▲"
			if res.Order == "desc" {
				other, arrow = "asc", "▼"
			}
			sl.Href, sl.Arrow = link(s.key, other, 1), arrow
		}
		l.Sorts = append(l.Sorts, sl)
	}
	if res.Page > 1 {
		l.Prev = link(res.Sort, res.Order, res.Page-1)
	}
	if res.Page < res.Pages {
		l.Next = link(res.Sort, res.Order, res.Page+1)
	}
	d.render(w, r, http.StatusOK, "flows", view{Title: "Flows", Nav: "flows", Notice: notice(r), Data: l})
}

// flowData is the flow page.
type flowData struct {
	Flow       automation.Flow
	Webhook    *automation.WebhookDescriptor
	Enterprise bool
	AllowedIPs string // one per line, for the form
	Test       *automation.WebhookTest
	Sample     *automation.WebhookSample
	SampleNote string
	Schema     []schemaRow
	TestBody   string        // the test event's JSON, prefilled from the sample
	Picture    template.HTML // the definition drawn (picture.go)
	Panels     panels        // what the picture's boxes open
	Insights   *insightsView // the flow's runs over ?period= (insights.go)
}

// flow shows one flow; it is also what the flow's forms render after a
// failure, with the message in errMsg and the allowlist as typed.
func (d *Dashboard) flow(w http.ResponseWriter, r *http.Request) {
	d.renderFlow(w, r, http.StatusOK, notice(r), "", nil, nil)
}

func (d *Dashboard) renderFlow(w http.ResponseWriter, r *http.Request, status int, note, errMsg string,
	allowlist *string, test *automation.WebhookTest, keep ...func(*flowData)) {
	ctx, p, id := r.Context(), project(r), r.PathValue("flowId")
	f, err := d.svc.Flow(ctx, p, id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	data := flowData{Flow: f, Enterprise: p.Plan == automation.PlanEnterprise, Test: test,
		Picture: flowPicture(f, nil), Panels: flowPanels(f)}
	per, err := insightPeriod(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	in, err := d.svc.FlowInsights(ctx, p, id, string(per))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	data.Insights = newInsightsView(in, per)
	if f.Trigger.Type == automation.TriggerWebhook {
		wh, err := d.svc.Webhook(ctx, p, id)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		data.Webhook = &wh
		sec, err := d.svc.WebhookSecurity(ctx, p, id)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		data.AllowedIPs = strings.Join(sec.AllowedIPs, "\n")
		if allowlist != nil {
			data.AllowedIPs = *allowlist
		}
		s, err := d.svc.WebhookSample(ctx, p, id)
		switch {
		case automation.IsNotFound(err):
			data.SampleNote = "No event captured yet. Press “Test trigger”, then send an event to the test URL within two minutes."
		case err != nil:
			_, data.SampleNote = d.problem(r, err)
		default:
			data.Sample = &s
			data.Schema = flattenSchema("trigger.body", s.Schema)
			data.TestBody = prettyJSON(s.Trigger.Body)
		}
		if data.TestBody == "" || len(data.TestBody) > maxTestBody {
			data.TestBody = "{}"
		}
	}
	for _, k := range keep {
		k(&data)
	}
	d.render(w, r, status, "flow", view{Title: f.Name, Nav: "flows", Notice: note, Error: errMsg, Data: data})
}

func (d *Dashboard) enable(w http.ResponseWriter, r *http.Request) {
	d.setStatus(w, r, d.svc.EnableFlow, "enabled")
}

func (d *Dashboard) disable(w http.ResponseWriter, r *http.Request) {
	d.setStatus(w, r, d.svc.DisableFlow, "disabled")
}

func (d *Dashboard) setStatus(w http.ResponseWriter, r *http.Request,
	change func(ctx context.Context, p automation.Project, id string) (automation.Flow, error), done string) {
	id := r.PathValue("flowId")
	if _, err := change(r.Context(), project(r), id); err != nil {
		d.flowFormFailed(w, r, err, nil)
		return
	}
	d.redirect(w, r, "/ui/flows/"+url.PathEscape(id)+"?done="+done)
}

// flowFormFailed shows the flow page with the Service's message, or the
// error page when the flow itself is not there.
func (d *Dashboard) flowFormFailed(w http.ResponseWriter, r *http.Request, err error, allowlist *string) {
	if errors.Is(err, automation.ErrNotFound) {
		d.fail(w, r, err)
		return
	}
	status, msg := d.problem(r, err)
	d.renderFlow(w, r, status, "", msg, allowlist, nil)
}

func (d *Dashboard) setAllowlist(w http.ResponseWriter, r *http.Request) {
	raw := r.PostFormValue("allowedIPs")
	ips := strings.FieldsFunc(raw, func(c rune) bool { return c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t' })
	id := r.PathValue("flowId")
	if _, err := d.svc.SetWebhookSecurity(r.Context(), project(r), id, ips); err != nil {
		d.flowFormFailed(w, r, err, &raw)
		return
	}
	d.redirect(w, r, "/ui/flows/"+url.PathEscape(id)+"?done=allowlist")
}

// armTest arms the Test Trigger and shows the flow with the test URL.
func (d *Dashboard) armTest(w http.ResponseWriter, r *http.Request) {
	t, err := d.svc.ArmWebhookTest(r.Context(), project(r), r.PathValue("flowId"))
	if err != nil {
		d.flowFormFailed(w, r, err, nil)
		return
	}
	d.renderFlow(w, r, http.StatusOK, "", "", nil, &t)
}

var runStatuses = []string{
	string(automation.RunRunning), string(automation.RunSucceeded), string(automation.RunFailed), string(automation.RunTimeout),
}

// runs is a flow's run history.
func (d *Dashboard) runs(w http.ResponseWriter, r *http.Request) {
	ctx, p, id := r.Context(), project(r), r.PathValue("flowId")
	f, err := d.svc.Flow(ctx, p, id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	l, err := d.svc.ListRuns(ctx, p, id, pageRequest(r))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "runs", view{Title: "Runs of " + f.Name, Nav: "flows", Data: struct {
		Flow  automation.Flow
		Runs  []automation.Run
		Pager pager
	}{f, l.Data, newPager(r, runStatuses, l.Cursor)}})
}

// run is one run with its steps.
func (d *Dashboard) run(w http.ResponseWriter, r *http.Request) {
	ctx, p := r.Context(), project(r)
	f, err := d.svc.Flow(ctx, p, r.PathValue("flowId"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	run, err := d.svc.Run(ctx, p, f.ID, r.PathValue("runId"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	trigger, _ := json.Marshal(run.Trigger)
	v := view{Title: "Run " + run.ID, Nav: "flows", Notice: notice(r)}
	if run.Status == automation.RunRunning {
		// Watch it go on step by step; a run waiting for a later attempt
		// or a WAIT is looked at again when it is due (at most a minute).
		v.Reload = 2
		if run.NextAttemptAt != nil {
			v.Reload = int(min(max(run.NextAttemptAt.Sub(d.opts.Clock()).Seconds(), 2), 60))
		}
	}
	// A run waiting on an approval shows it, with where to decide.
	var approval *automation.ApprovalItem
	var approvalLink string
	if run.WaitingFor == automation.WaitingApproval {
		if a, ok := d.pendingApproval(r, run.ID, ""); ok {
			approval, approvalLink = &a, runApprovalLink(a)
		}
	}
	v.Data = struct {
		Flow         automation.Flow
		Run          automation.Run
		Trigger      json.RawMessage
		View         runView
		Approval     *automation.ApprovalItem
		ApprovalLink string
	}{f, run, trigger, newRunView(f, run), approval, approvalLink}
	d.render(w, r, http.StatusOK, "run", v)
}

// connectionForm is what the create form keeps after a failure: never the
// key.
type connectionForm struct{ Name, App, Header, Prefix, AllowedHosts string }

func (d *Dashboard) connections(w http.ResponseWriter, r *http.Request) {
	d.renderConnections(w, r, http.StatusOK, notice(r), "", connectionForm{})
}

func (d *Dashboard) renderConnections(w http.ResponseWriter, r *http.Request, status int, note, errMsg string, form connectionForm) {
	l, err := d.svc.ListConnections(r.Context(), project(r), automation.PageRequest{Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	apps, err := d.svc.OAuthApps(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, status, "connections", view{Title: "Connections", Nav: "connections", Notice: note, Error: errMsg,
		Data: struct {
			Connections []automation.Connection
			Apps        []automation.OAuthApp
			Pager       pager
			Form        connectionForm
		}{l.Data, apps, newPager(r, nil, l.Cursor), form}})
}

func (d *Dashboard) createConnection(w http.ResponseWriter, r *http.Request) {
	form := connectionForm{
		Name: strings.TrimSpace(r.PostFormValue("name")), App: strings.TrimSpace(r.PostFormValue("app")),
		Header: strings.TrimSpace(r.PostFormValue("header")), Prefix: r.PostFormValue("prefix"),
		AllowedHosts: strings.TrimSpace(r.PostFormValue("allowedHosts")),
	}
	value := map[string]any{"apiKey": r.PostFormValue("apiKey")}
	if form.Header != "" {
		value["header"] = form.Header
	}
	if form.Prefix != "" || (form.Header != "" && !strings.EqualFold(form.Header, "Authorization")) {
		// A custom header usually takes the key as it is: its prefix is
		// what the form says, even empty.
		value["prefix"] = form.Prefix
	}
	raw, err := json.Marshal(value)
	if err == nil {
		_, err = d.svc.CreateConnection(r.Context(), project(r), automation.ConnectionInput{
			Name: form.Name, App: form.App, Type: automation.ConnectionAPIKey, Value: raw,
			AllowedHosts: splitHosts(form.AllowedHosts),
		})
	}
	if err != nil {
		status, msg := d.problem(r, err)
		d.renderConnections(w, r, status, "", msg, form)
		return
	}
	d.redirect(w, r, "/ui/connections?done=created")
}

func (d *Dashboard) confirmDelete(w http.ResponseWriter, r *http.Request) {
	c, err := d.svc.Connection(r.Context(), project(r), r.PathValue("connectionId"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "confirm_delete", view{Title: "Delete " + c.Name, Nav: "connections", Data: deletion{
		Crumbs: []crumb{{"/connections", "Connections"}},
		Name:   c.Name, ID: c.ID,
		Before: "The stored credential of ", After: " (" + c.App + ") is revoked at once: every flow that uses it fails from its next run.",
		Action: "/connections/" + c.ID + "/delete", Button: "Delete connection", Cancel: "/connections",
	}})
}

// deletion is what the page confirming a delete shows: the way back, what
// is deleted and what deleting it does (Before and After go around the ID).
type deletion struct {
	Crumbs                 []crumb
	Name, ID               string
	Before, After          string
	Action, Button, Cancel string // paths under /ui, the button's label
	Heading                string // the question; default "Delete “Name”?"
	Hidden                 []hiddenField
}

// hiddenField is a form value a confirmation page sends on.
type hiddenField struct{ Name, Value string }

// crumb is a link back, to a path under /ui.
type crumb struct{ Path, Text string }

func (d *Dashboard) deleteConnection(w http.ResponseWriter, r *http.Request) {
	if err := d.svc.DeleteConnection(r.Context(), project(r), r.PathValue("connectionId")); err != nil {
		d.fail(w, r, err)
		return
	}
	d.redirect(w, r, "/ui/connections?done=deleted")
}
