package apps_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"flowservice/pkg/apps"
	"flowservice/pkg/automation"
	"flowservice/pkg/engine"
	"flowservice/pkg/flowtest"
)

// TestCatalogLoads: at least the twelve apps of the catalog, 2 to 5 actions
// each, every action's schema, templates and expressions compile as the
// executor runs them.
func TestCatalogLoads(t *testing.T) {
	c, err := apps.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"slack", "github", "stripe", "discord", "telegram", "notion", "google_sheets",
		"airtable", "linear", "hubspot", "openai", "resend"}
	for _, k := range want {
		if _, ok := c.App(k); !ok {
			t.Errorf("app %s is missing", k)
		}
	}
	for _, a := range c.Apps() {
		if n := len(a.Actions); n < apps.MinActions || n > apps.MaxActions {
			t.Errorf("%s: %d actions", a.Key, n)
		}
		for _, act := range a.Actions {
			if err := engine.CheckAction(act); err != nil {
				t.Errorf("%v", err)
			}
		}
	}
}

// seen is one request the double received.
type seen struct {
	method, path, rawQuery string
	header                 http.Header
	body                   string
}

// actionCase is one action run against the scripted double: what it
// sends, what the double answers, what the step outputs.
type actionCase struct {
	input      string
	answer     string // JSON the double answers with 200
	method     string
	path       string            // after the baseUrl's path
	header     map[string]string // headers the request must carry
	noAuth     bool              // the key travels in the path: no Authorization header
	bodyHas    []string          // substrings of the request body (JSON or form)
	queryHas   []string          // substrings of the raw query
	wantOutput string            // JSON the output must equal
}

var cases = map[string]actionCase{
	"slack.post_message": {input: `{"channel": "#general", "text": "{{ trigger.body.ref }} deployed"}`,
		answer: `{"ok": true, "ts": "1.2", "channel": "C1"}`, method: "POST", path: "/api/chat.postMessage",
		bodyHas: []string{`"channel":"#general"`, `"text":"main deployed"`}, wantOutput: `{"ts":"1.2","channel":"C1"}`},
	"slack.add_reaction": {input: `{"channel": "C1", "timestamp": "1.2", "name": "rocket"}`, answer: `{"ok": true}`,
		method: "POST", path: "/api/reactions.add", bodyHas: []string{`"name":"rocket"`}, wantOutput: `{"ok":true}`},
	"slack.list_channels": {input: `{}`, answer: `{"ok": true, "channels": [{"id": "C1"}], "response_metadata": {"next_cursor": ""}}`,
		method: "GET", path: "/api/conversations.list", queryHas: []string{"limit=200"}, wantOutput: `[{"id":"C1"}]`},
	"github.create_issue": {input: `{"owner": "acme", "repo": "web", "title": "Broken", "labels": ["bug"]}`,
		answer: `{"number": 7, "html_url": "https://github.com/acme/web/issues/7", "id": 99}`, method: "POST", path: "/repos/acme/web/issues",
		header: map[string]string{"X-GitHub-Api-Version": "2022-11-28"}, bodyHas: []string{`"title":"Broken"`, `"labels":["bug"]`},
		wantOutput: `{"number":7,"url":"https://github.com/acme/web/issues/7","id":99}`},
	"github.create_comment": {input: `{"owner": "acme", "repo": "web", "number": 7, "body": "Fixed"}`,
		answer: `{"id": 5, "html_url": "u"}`, method: "POST", path: "/repos/acme/web/issues/7/comments",
		bodyHas: []string{`"body":"Fixed"`}, wantOutput: `{"id":5,"url":"u"}`},
	"github.get_repository": {input: `{"owner": "acme", "repo": "../admin"}`,
		answer: `{"full_name": "acme/x", "default_branch": "main", "stargazers_count": 3, "private": false}`, method: "GET",
		path: "/repos/acme/..%2Fadmin", wantOutput: `{"fullName":"acme/x","defaultBranch":"main","stars":3,"private":false}`},
	"stripe.create_customer": {input: `{"email": "ada@example.com", "name": "Ada"}`, answer: `{"id": "cus_1", "email": "ada@example.com"}`,
		method: "POST", path: "/v1/customers", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		bodyHas: []string{"email=ada%40example.com", "name=Ada"}, wantOutput: `{"id":"cus_1","email":"ada@example.com"}`},
	"stripe.create_payment_intent": {input: `{"amount": 1999, "currency": "usd", "payment_method": "pm_1"}`,
		answer: `{"id": "pi_1", "status": "succeeded", "amount": 1999}`, method: "POST", path: "/v1/payment_intents",
		bodyHas:    []string{"amount=1999", "currency=usd", "confirm=true", "payment_method=pm_1"},
		wantOutput: `{"id":"pi_1","status":"succeeded","amount":1999}`},
	"stripe.create_refund": {input: `{"payment_intent": "pi_1", "reason": "duplicate"}`, answer: `{"id": "re_1", "status": "succeeded"}`,
		method: "POST", path: "/v1/refunds", bodyHas: []string{"payment_intent=pi_1", "reason=duplicate"}, wantOutput: `{"id":"re_1","status":"succeeded"}`},
	"stripe.list_customers": {input: `{"email": "ada@example.com"}`, answer: `{"data": [{"id": "cus_1"}], "has_more": false}`,
		method: "GET", path: "/v1/customers", queryHas: []string{"email=ada%40example.com"}, wantOutput: `[{"id":"cus_1"}]`},
	"discord.send_message": {input: `{"channel_id": "42", "content": "hi"}`, answer: `{"id": "m1", "channel_id": "42"}`,
		method: "POST", path: "/api/v10/channels/42/messages", bodyHas: []string{`"content":"hi"`}, wantOutput: `{"id":"m1","channelId":"42"}`},
	"discord.add_reaction": {input: `{"channel_id": "42", "message_id": "m1", "emoji": "👍"}`, answer: `{}`,
		method: "PUT", path: "/api/v10/channels/42/messages/m1/reactions/%F0%9F%91%8D/@me", wantOutput: `{"status":200}`},
	"telegram.send_message": {input: `{"chat_id": "12", "text": "hello"}`, answer: `{"ok": true, "result": {"message_id": 3, "chat": {"id": 12}}}`,
		method: "POST", path: "/bottok-123/sendMessage", noAuth: true, bodyHas: []string{`"chat_id":"12"`}, wantOutput: `{"messageId":3,"chatId":12}`},
	"telegram.send_photo": {input: `{"chat_id": "12", "photo": "https://example.com/a.png"}`, answer: `{"ok": true, "result": {"message_id": 4}}`,
		method: "POST", path: "/bottok-123/sendPhoto", noAuth: true, bodyHas: []string{`"photo":"https://example.com/a.png"`}, wantOutput: `{"messageId":4}`},
	"notion.create_page": {input: `{"database_id": "db1", "title": "Task", "properties": {"Done": {"checkbox": true}}}`,
		answer: `{"id": "p1", "url": "https://notion.so/p1"}`, method: "POST", path: "/v1/pages", header: map[string]string{"Notion-Version": "2022-06-28"},
		bodyHas:    []string{`"database_id":"db1"`, `"Name":{"title":[{"text":{"content":"Task"}}]}`, `"Done":{"checkbox":true}`},
		wantOutput: `{"id":"p1","url":"https://notion.so/p1"}`},
	"notion.query_database": {input: `{"database_id": "db1"}`, answer: `{"results": [{"id": "p1"}]}`, method: "POST",
		path: "/v1/databases/db1/query", bodyHas: []string{`"page_size":100`}, wantOutput: `[{"id":"p1"}]`},
	"notion.append_text": {input: `{"page_id": "p1", "text": "note"}`, answer: `{"results": [{"id": "b1"}]}`, method: "PATCH",
		path: "/v1/blocks/p1/children", bodyHas: []string{`"content":"note"`}, wantOutput: `{"blocks":1}`},
	"google_sheets.append_row": {input: `{"spreadsheet_id": "s1", "range": "Sheet1!A:C", "values": ["a", 1, true]}`,
		answer: `{"updates": {"updatedRange": "Sheet1!A2:C2", "updatedRows": 1}}`, method: "POST",
		path: "/v4/spreadsheets/s1/values/Sheet1%21A:C:append", queryHas: []string{"valueInputOption=USER_ENTERED"},
		bodyHas: []string{`"values":[["a",1,true]]`}, wantOutput: `{"updatedRange":"Sheet1!A2:C2","updatedRows":1}`},
	"google_sheets.read_range": {input: `{"spreadsheet_id": "s1", "range": "Sheet1!A1:B2"}`, answer: `{"range": "Sheet1!A1:B2", "values": [["x"]]}`,
		method: "GET", path: "/v4/spreadsheets/s1/values/Sheet1%21A1:B2", wantOutput: `{"range":"Sheet1!A1:B2","values":[["x"]]}`},
	"google_sheets.update_range": {input: `{"spreadsheet_id": "s1", "range": "Sheet1!A2", "values": [["y"]]}`,
		answer: `{"updatedRange": "Sheet1!A2", "updatedCells": 1}`, method: "PUT", path: "/v4/spreadsheets/s1/values/Sheet1%21A2",
		bodyHas: []string{`"values":[["y"]]`}, wantOutput: `{"updatedRange":"Sheet1!A2","updatedCells":1}`},
	"airtable.create_record": {input: `{"base_id": "app1", "table": "Leads list", "fields": {"Name": "Ada"}}`,
		answer: `{"id": "rec1", "fields": {"Name": "Ada"}}`, method: "POST", path: "/v0/app1/Leads%20list",
		bodyHas: []string{`"fields":{"Name":"Ada"}`, `"typecast":true`}, wantOutput: `{"id":"rec1","fields":{"Name":"Ada"}}`},
	"airtable.list_records": {input: `{"base_id": "app1", "table": "Leads", "filter_formula": "{Status} = 'Open'"}`,
		answer: `{"records": [{"id": "rec1"}]}`, method: "GET", path: "/v0/app1/Leads",
		queryHas: []string{"filterByFormula=%7BStatus%7D+%3D+%27Open%27"}, wantOutput: `[{"id":"rec1"}]`},
	"airtable.update_record": {input: `{"base_id": "app1", "table": "Leads", "record_id": "rec1", "fields": {"Status": "Won"}}`,
		answer: `{"id": "rec1", "fields": {"Status": "Won"}}`, method: "PATCH", path: "/v0/app1/Leads/rec1",
		bodyHas: []string{`"Status":"Won"`}, wantOutput: `{"id":"rec1","fields":{"Status":"Won"}}`},
	"linear.create_issue": {input: `{"team_id": "t1", "title": "Bug", "priority": 2}`,
		answer: `{"data": {"issueCreate": {"success": true, "issue": {"id": "i1", "identifier": "ENG-1", "url": "u"}}}}`,
		method: "POST", path: "/graphql", bodyHas: []string{`"teamId":"t1"`, `"priority":2`, `issueCreate`},
		wantOutput: `{"id":"i1","identifier":"ENG-1","url":"u"}`},
	"linear.create_comment": {input: `{"issue_id": "i1", "body": "ok"}`,
		answer: `{"data": {"commentCreate": {"success": true, "comment": {"id": "c1", "url": "u"}}}}`,
		method: "POST", path: "/graphql", bodyHas: []string{`"issueId":"i1"`}, wantOutput: `{"id":"c1","url":"u"}`},
	"hubspot.create_contact": {input: `{"email": "ada@example.com", "firstname": "Ada"}`,
		answer: `{"id": "1", "properties": {"email": "ada@example.com"}}`, method: "POST", path: "/crm/v3/objects/contacts",
		bodyHas: []string{`"email":"ada@example.com"`, `"firstname":"Ada"`}, wantOutput: `{"id":"1","properties":{"email":"ada@example.com"}}`},
	"hubspot.search_contacts": {input: `{"email": "ada@example.com"}`, answer: `{"results": [{"id": "1"}]}`, method: "POST",
		path: "/crm/v3/objects/contacts/search", bodyHas: []string{`"value":"ada@example.com"`}, wantOutput: `[{"id":"1"}]`},
	"hubspot.create_deal": {input: `{"dealname": "Big", "amount": 1000}`, answer: `{"id": "d1"}`, method: "POST",
		path: "/crm/v3/objects/deals", bodyHas: []string{`"dealname":"Big"`, `"amount":1000`}, wantOutput: `{"id":"d1"}`},
	"openai.chat_completion": {input: `{"model": "gpt-4o-mini", "prompt": "Hi", "system": "Be brief"}`,
		answer: `{"choices": [{"message": {"content": "Hello"}, "finish_reason": "stop"}], "usage": {"total_tokens": 5}}`,
		method: "POST", path: "/v1/chat/completions",
		bodyHas:    []string{`"messages":[{"content":"Be brief","role":"system"},{"content":"Hi","role":"user"}]`},
		wantOutput: `{"text":"Hello","finishReason":"stop","usage":{"total_tokens":5}}`},
	"openai.create_embedding": {input: `{"model": "text-embedding-3-small", "text": "x"}`,
		answer: `{"data": [{"embedding": [0.5, 1]}], "usage": {"total_tokens": 1}}`, method: "POST", path: "/v1/embeddings",
		bodyHas: []string{`"input":"x"`}, wantOutput: `{"embedding":[0.5,1],"usage":{"total_tokens":1}}`},
	"resend.send_email": {input: `{"from": "Ada <ada@example.com>", "to": ["bob@example.com"], "subject": "Hi", "text": "Hello"}`,
		answer: `{"id": "e1"}`, method: "POST", path: "/emails", bodyHas: []string{`"to":["bob@example.com"]`, `"subject":"Hi"`},
		wantOutput: `{"id":"e1"}`},
	"resend.get_email": {input: `{"id": "e1"}`, answer: `{"id": "e1", "last_event": "delivered", "to": ["b"]}`, method: "GET",
		path: "/emails/e1", wantOutput: `{"id":"e1","lastEvent":"delivered","to":["b"]}`},
}

// TestEveryActionAgainstADouble runs each action of the catalog as an
// ACTION step whose connection's baseUrl points at a scripted double: the
// request's method, path (the baseUrl's path kept), auth header and body,
// and the step's output. An action without a case fails: adding an app
// is adding its file and its cases here.
func TestEveryActionAgainstADouble(t *testing.T) {
	cat := apps.MustLoad()
	var (
		mu     sync.Mutex
		got    []seen
		answer string
	)
	double := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), string(b)})
		a := answer
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, a)
	}))
	defer double.Close()

	fe := flowtest.New(t, flowtest.Options{})
	p, _ := fe.Project(t, "apps", automation.PlanFree)
	ctx := context.Background()
	for _, app := range cat.Apps() {
		key := "tok-123"
		conn, err := fe.Svc.CreateConnection(ctx, p, automation.ConnectionInput{
			Name: app.Key, App: app.Key, Type: automation.ConnectionAPIKey,
			Value:   json.RawMessage(`{"apiKey": "` + key + `"` + prefixOf(app) + `}`),
			BaseURL: double.URL + "/proxy/",
		})
		if err != nil {
			t.Fatalf("%s: connection: %v", app.Key, err)
		}
		// The app's hosts fence the credential by default; baseUrl's joins.
		u, _ := url.Parse(double.URL)
		if len(conn.AllowedHosts) != len(app.Connection.AllowedHosts)+1 || conn.AllowedHosts[len(conn.AllowedHosts)-1] != u.Hostname() {
			t.Errorf("%s: allowedHosts %v", app.Key, conn.AllowedHosts)
		}
		for _, act := range app.Actions {
			tc, ok := cases[act.Key]
			if !ok {
				t.Errorf("action %s has no case in this test", act.Key)
				continue
			}
			t.Run(act.Key, func(t *testing.T) {
				mu.Lock()
				got, answer = nil, tc.answer
				mu.Unlock()
				f := fe.ActiveFlow(t, p, act.Key, automation.Step{Name: "act", Type: automation.StepAction,
					Action: act.Key, Connection: app.Key, Input: json.RawMessage(tc.input)})
				r := fe.StartRef(t, f)
				if _, err := fe.Svc.ExecuteRun(ctx, p.ID, r.ID); err != nil {
					t.Fatal(err)
				}
				run, err := fe.Svc.Run(ctx, p, f.ID, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if run.Status != automation.RunSucceeded {
					t.Fatalf("run %s: %s %+v", run.Status, run.Error, run.Steps)
				}
				mu.Lock()
				reqs := got
				mu.Unlock()
				if len(reqs) != 1 {
					t.Fatalf("%d requests, want 1", len(reqs))
				}
				q := reqs[0]
				if q.method != tc.method || q.path != "/proxy"+tc.path {
					t.Errorf("request %s %s, want %s /proxy%s", q.method, q.path, tc.method, tc.path)
				}
				auth := q.header.Get("Authorization")
				switch {
				case tc.noAuth && auth != "":
					t.Errorf("Authorization %q; the key travels in the path", auth)
				case !tc.noAuth && auth != strings.TrimSpace(prefixText(app))+key && auth != prefixText(app)+key:
					t.Errorf("Authorization %q, want %q", auth, prefixText(app)+key)
				}
				for k, v := range tc.header {
					if q.header.Get(k) != v {
						t.Errorf("header %s %q, want %q", k, q.header.Get(k), v)
					}
				}
				for _, s := range tc.bodyHas {
					if !strings.Contains(q.body, s) {
						t.Errorf("body %s lacks %s", q.body, s)
					}
				}
				for _, s := range tc.queryHas {
					if !strings.Contains(q.rawQuery, s) {
						t.Errorf("query %s lacks %s", q.rawQuery, s)
					}
				}
				if q.method != "GET" && q.header.Get("Idempotency-Key") == "" {
					t.Errorf("no Idempotency-Key on %s", q.method)
				}
				if out := string(run.Steps[0].Output); !sameJSON(out, tc.wantOutput) {
					t.Errorf("output %s, want %s", out, tc.wantOutput)
				}
			})
		}
	}
}

func prefixOf(a automation.App) string {
	if a.Connection.Prefix == nil {
		return ""
	}
	b, _ := json.Marshal(*a.Connection.Prefix)
	return `, "prefix": ` + string(b)
}

func prefixText(a automation.App) string {
	if a.Connection.Prefix == nil {
		return "Bearer "
	}
	return *a.Connection.Prefix
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// TestActionInputCheckedAtSave: a 400 naming the input field, for a missing
// field, a wrong type, a value outside the enum, an unknown field and an
// unknown action; a template passes for any type.
func TestActionInputCheckedAtSave(t *testing.T) {
	fe := flowtest.New(t, flowtest.Options{})
	p, _ := fe.Project(t, "save", automation.PlanFree)
	for _, tc := range []struct{ action, input, want string }{
		{"slack.post_message", `{"channel": "#x"}`, "steps[0].input.text is required"},
		{"slack.post_message", `{"channel": 5, "text": "t"}`, "steps[0].input.channel must be string, got a number"},
		{"stripe.create_refund", `{"payment_intent": "pi", "reason": "bored"}`, `steps[0].input.reason "bored": allowed values are`},
		{"github.create_issue", `{"owner": "a", "repo": "b", "title": "c", "colour": "red"}`, "steps[0].input.colour is not a field of this input"},
		{"stripe.create_payment_intent", `{"amount": 1.5, "currency": "usd"}`, "steps[0].input.amount must be integer"},
		{"slack.no_such", `{}`, `steps[0].action "slack.no_such": no such action in the app catalog`},
		{"resend.send_email", `{"from": "a@b.c", "to": ["not an address"], "subject": "s"}`, "steps[0].input.to[0]"},
	} {
		steps := []automation.Step{{Name: "act", Type: automation.StepAction, Action: tc.action, Connection: "c", Input: json.RawMessage(tc.input)}}
		name, eng := "f", automation.FlowBuilder
		_, err := fe.Svc.CreateFlow(context.Background(), p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps})
		if err == nil || !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want a 400 with %q", tc.action, tc.input, err, tc.want)
		}
	}
	steps := []automation.Step{{Name: "act", Type: automation.StepAction, Action: "stripe.create_payment_intent", Connection: "c",
		Input: json.RawMessage(`{"amount": "{{ trigger.body.cents }}", "currency": "usd"}`)}}
	name, eng := "ok", automation.FlowBuilder
	if _, err := fe.Svc.CreateFlow(context.Background(), p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps}); err != nil {
		t.Errorf("a templated integer: %v", err)
	}
}

// TestActionRenderedInputIsData: trigger data that looks like a template
// is sent as it is, never evaluated; a template that renders the wrong
// type fails the step before anything is sent.
func TestActionRenderedInputIsData(t *testing.T) {
	var bodies []string
	var mu sync.Mutex
	double := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		io.WriteString(w, `{"ok": true, "ts": "1", "channel": "C"}`)
	}))
	defer double.Close()
	fe := flowtest.New(t, flowtest.Options{})
	p, _ := fe.Project(t, "data", automation.PlanFree)
	ctx := context.Background()
	if _, err := fe.Svc.CreateConnection(ctx, p, automation.ConnectionInput{Name: "slack", App: "slack",
		Type: automation.ConnectionAPIKey, Value: json.RawMessage(`{"apiKey": "xoxb-1"}`), BaseURL: double.URL}); err != nil {
		t.Fatal(err)
	}
	f := fe.ActiveFlow(t, p, "f", automation.Step{Name: "act", Type: automation.StepAction, Action: "slack.post_message",
		Connection: "slack", Input: json.RawMessage(`{"channel": "#x", "text": "{{ trigger.body.ref }}"}`)})
	r, err := fe.Svc.StartRun(ctx, f, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{"ref": "{{ input.channel }}{{ 6*7 }}"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fe.Svc.ExecuteRun(ctx, p.ID, r.ID); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 1 || !strings.Contains(bodies[0], `"text":"{{ input.channel }}{{ 6*7 }}"`) {
		t.Fatalf("bodies %v: the trigger's text must be sent as it came", bodies)
	}

	g := fe.ActiveFlow(t, p, "g", automation.Step{Name: "act", Type: automation.StepAction, Action: "slack.post_message",
		Connection: "slack", Input: json.RawMessage(`{"channel": "{{ trigger.body.n }}", "text": "t"}`)})
	r, err = fe.Svc.StartRun(ctx, g, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{"n": 5}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fe.Svc.ExecuteRun(ctx, p.ID, r.ID); err != nil {
		t.Fatal(err)
	}
	run, _ := fe.Svc.Run(ctx, p, g.ID, r.ID)
	if run.Status != automation.RunFailed || !strings.Contains(run.Steps[0].Error, "input.channel must be string") || len(bodies) != 1 {
		t.Errorf("run %s %q, %d requests: want FAILED naming input.channel, nothing sent", run.Status, run.Steps[0].Error, len(bodies))
	}
}

// TestOAuthAppFromCatalog: an operator's OAuth app named after a catalog
// app takes the catalog's endpoints and scopes, so that only the client
// is theirs to give; another name still needs its endpoints.
func TestOAuthAppFromCatalog(t *testing.T) {
	fe := flowtest.New(t, flowtest.Options{})
	a, err := fe.Svc.AddOAuthApp(context.Background(), automation.OAuthAppInput{Name: "slack", ClientID: "123.456", ClientSecret: "shh"})
	if err != nil {
		t.Fatal(err)
	}
	if a.AuthorizeURL != "https://slack.com/oauth/v2/authorize" || a.TokenURL != "https://slack.com/api/oauth.v2.access" ||
		strings.Join(a.Scopes, " ") != "chat:write channels:read reactions:write" {
		t.Errorf("app %+v: want Slack's endpoints and the actions' scopes", a)
	}
	if _, err := fe.Svc.AddOAuthApp(context.Background(), automation.OAuthAppInput{Name: "custom", ClientID: "c", ClientSecret: "s"}); err == nil {
		t.Error("an app outside the catalog without endpoints was accepted")
	}
}
