package deploy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp/management"
)

// TestKeyRolesOnLambda: keys with roles in the stage's DynamoDB tables, the
// api function as API Gateway calls it: a viewer reads and cannot write, an
// operator enables but cannot delete, the admin key does everything.
func TestKeyRolesOnLambda(t *testing.T) {
	ctx := context.Background()
	st := newStack(t)
	api, err := management.NewHandler(ctx, st.aws, st.cfgOf("ApiFunction"))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[automation.Role]string{}
	for _, r := range []automation.Role{automation.RoleViewer, automation.RoleOperator} {
		if keys[r], _, err = st.svc.CreateAPIKeyWithRole(ctx, st.project.ID, r); err != nil {
			t.Fatal(err)
		}
	}
	ks, err := st.svc.APIKeys(ctx, st.project.ID)
	if err != nil || len(ks) != 3 || ks[0].Role != automation.RoleAdmin || ks[1].Role != automation.RoleViewer ||
		ks[2].Role != automation.RoleOperator {
		t.Fatalf("keys on DynamoDB = %+v, %v; want admin, viewer, operator", ks, err)
	}

	status, body := call(t, api, "POST", "/api/v1/flows", keys[automation.RoleViewer], `{"name": "x", "engine": "FLOW_BUILDER"}`)
	if e, _ := body["error"].(map[string]any); status != 403 || e["code"] != "FORBIDDEN" || !strings.Contains(e["message"].(string), "viewer") {
		t.Fatalf("viewer creates a flow = %d %v, want 403 FORBIDDEN naming the role", status, body)
	}
	status, f := call(t, api, "POST", "/api/v1/flows", st.key, `{"name": "x", "engine": "FLOW_BUILDER"}`)
	if status != 201 {
		t.Fatalf("admin creates a flow = %d %v", status, f)
	}
	id := f["id"].(string)
	if status, g := call(t, api, "GET", "/api/v1/flows/"+id, keys[automation.RoleViewer], ""); status != 200 || g["id"] != id {
		t.Errorf("viewer reads the flow = %d %v", status, g)
	}
	if status, g := call(t, api, "POST", "/api/v1/flows/"+id+"/enable", keys[automation.RoleOperator], ""); status != 200 || g["status"] != "ACTIVE" {
		t.Errorf("operator enables = %d %v", status, g)
	}
	status, body = call(t, api, "DELETE", "/api/v1/flows/"+id, keys[automation.RoleOperator], "")
	if e, _ := body["error"].(map[string]any); status != 403 || e["code"] != "FORBIDDEN" || !strings.Contains(e["message"].(string), "operator") {
		t.Errorf("operator deletes = %d %v, want 403 FORBIDDEN", status, body)
	}
	if status, _ := call(t, api, "GET", "/api/v1/flows/"+id, st.key, ""); status != 200 {
		t.Errorf("the flow after the operator's refused delete: %d, want 200", status)
	}
}

// TestAuditLogOnLambda: the api function records each change in the audit
// table in the change's own transaction, with the key, its role and API
// Gateway's source IP, and lists them newest first; a refused write and a
// write that fails leave nothing.
func TestAuditLogOnLambda(t *testing.T) {
	recordGrants(t)
	ctx := context.Background()
	st := newStack(t)
	api, err := management.NewHandler(ctx, st.aws, st.cfgOf("ApiFunction"))
	if err != nil {
		t.Fatal(err)
	}
	editor, ek, err := st.svc.CreateAPIKeyWithRole(ctx, st.project.ID, automation.RoleEditor)
	if err != nil {
		t.Fatal(err)
	}
	viewer, _, err := st.svc.CreateAPIKeyWithRole(ctx, st.project.ID, automation.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	status, f := call(t, api, "POST", "/api/v1/flows", editor, `{"name": "audited", "engine": "FLOW_BUILDER"}`)
	if status != 201 {
		t.Fatalf("create flow = %d %v", status, f)
	}
	id := f["id"].(string)
	status, c := call(t, api, "POST", "/api/v1/connections", editor, `{"name": "s", "app": "stripe", "type": "API_KEY", "value": {"apiKey": "sk_1"}}`)
	if status != 201 {
		t.Fatalf("create connection = %d %v", status, c)
	}
	if status, _ := call(t, api, "DELETE", "/api/v1/connections/"+c["id"].(string), editor, ""); status != 204 {
		t.Fatalf("delete connection = %d", status)
	}
	if status, _ := call(t, api, "POST", "/api/v1/flows/"+id+"/webhook/test", editor, ""); status != 200 {
		t.Fatalf("arm test = %d", status)
	}
	if status, _ := call(t, api, "DELETE", "/api/v1/flows/"+id, viewer, ""); status != 403 {
		t.Fatalf("viewer delete = %d, want 403", status)
	}
	if status, _ := call(t, api, "DELETE", "/api/v1/connections/con_nosuch", editor, ""); status != 404 {
		t.Fatalf("delete unknown connection = %d, want 404", status)
	}
	if status, _ := call(t, api, "DELETE", "/api/v1/flows/"+id, editor, ""); status != 204 {
		t.Fatalf("delete flow = %d", status)
	}

	status, page := call(t, api, "GET", "/api/v1/audit?limit=2", viewer, "")
	if status != 200 {
		t.Fatalf("GET /api/v1/audit = %d %v", status, page)
	}
	var got []map[string]any
	for i := 0; ; i++ {
		for _, e := range page["data"].([]any) {
			got = append(got, e.(map[string]any))
		}
		if page["hasMore"] != true || i > 5 {
			break
		}
		if status, page = call(t, api, "GET", "/api/v1/audit?limit=2&cursor="+page["cursor"].(string), viewer, ""); status != 200 {
			t.Fatalf("next page = %d %v", status, page)
		}
	}
	want := []string{"flow.delete", "flow.arm_test", "connection.delete", "connection.create", "flow.create"}
	if len(got) != len(want) {
		t.Fatalf("audit log on DynamoDB = %v, want %v", got, want)
	}
	for i, w := range want {
		e := got[i]
		actor, _ := e["actor"].(map[string]any)
		res, _ := e["resource"].(map[string]any)
		if e["action"] != w || actor["keyId"] != ek.ID || actor["role"] != "editor" || e["sourceIp"] != "198.51.100.10" || res["id"] == "" {
			t.Errorf("entry %d = %v, want %s by %s from 198.51.100.10", i, e, w, ek.ID)
		}
	}
	if res := got[4]["resource"].(map[string]any); res["type"] != "flow" || res["id"] != id {
		t.Errorf("flow.create resource = %v, want flow %s", res, id)
	}
}

// runOnMoto sends a webhook to flowID through the webhook function, drains
// the queue into the runner, and returns the run as the api function shows it.
func (e *e2e) runOnMoto(t *testing.T, flowID string) map[string]any {
	t.Helper()
	status, acc := call(t, e.hook, "POST", "/api/v1/webhooks/"+flowID, "", `{}`)
	if status != 200 {
		t.Fatalf("webhook = %d %v", status, acc)
	}
	delivered := 0
	for i := 0; i < 5 && delivered == 0; i++ {
		delivered = e.poll(t)
	}
	_, run := call(t, e.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+acc["runId"].(string), e.key, "")
	return run
}

// TestAllowedHostsOnLambda: on the Lambda path a connection fenced to
// localhost is refused for 127.0.0.1, with nothing sent there and the run
// FAILED naming the host, and is sent to localhost.
func TestAllowedHostsOnLambda(t *testing.T) {
	e := newE2E(t, 3, automation.RunPolicy{MaxAttempts: 1})
	ext, calls := external(t, 200)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ext.URL, "http://"))
	status, c := call(t, e.api, "POST", "/api/v1/connections", e.key, `{"name": "fenced", "app": "svc", "type": "API_KEY",
		"value": {"apiKey": "sk_fenced_9"}, "allowedHosts": ["localhost"]}`)
	if status != 201 || fmt.Sprint(c["allowedHosts"]) != "[localhost]" {
		t.Fatalf("create connection = %d %v", status, c)
	}
	if status, body := call(t, e.api, "POST", "/api/v1/connections", e.key, `{"name": "bad", "app": "svc", "type": "API_KEY",
		"value": {"apiKey": "k"}, "allowedHosts": ["*"]}`); status != 400 || !strings.Contains(fmt.Sprint(body), "allowedHosts[0]") {
		t.Errorf("allowedHosts [*] = %d %v, want 400 naming the entry", status, body)
	}
	flow := func(url string) string {
		status, f := call(t, e.api, "POST", "/api/v1/flows", e.key, fmt.Sprintf(`{"name": "fenced", "engine": "FLOW_BUILDER",
			"steps": [{"name": "call", "type": "HTTP", "connectionId": %q, "method": "POST", "url": %q}]}`, c["id"], url))
		if status != 201 {
			t.Fatalf("create flow = %d %v", status, f)
		}
		if status, g := call(t, e.api, "POST", "/api/v1/flows/"+f["id"].(string)+"/enable", e.key, ""); status != 200 {
			t.Fatalf("enable = %d %v", status, g)
		}
		return f["id"].(string)
	}
	run := e.runOnMoto(t, flow("http://127.0.0.1:"+port+"/x"))
	if run["status"] != "FAILED" || !strings.Contains(fmt.Sprint(run["error"]), "refused to send it to 127.0.0.1") || calls() != 0 {
		t.Fatalf("fenced run = %v after %d calls; want FAILED naming 127.0.0.1 after none", run, calls())
	}
	run = e.runOnMoto(t, flow("http://localhost:"+port+"/x"))
	if run["status"] != "SUCCEEDED" || calls() != 1 {
		t.Fatalf("allowed run = %v after %d calls; want SUCCEEDED after 1", run, calls())
	}
	if _, list := call(t, e.api, "GET", "/api/v1/connections", e.key, ""); !strings.Contains(fmt.Sprint(list["data"]), "allowedHosts:[localhost]") {
		t.Errorf("connection list lacks allowedHosts: %v", list)
	}
}

// TestCredentialTypesOnLambda: BASIC, HEADER and QUERY credentials kept in
// Secrets Manager reach a fake service that echoes them back, and the run
// record the api function shows has every echo masked.
func TestCredentialTypesOnLambda(t *testing.T) {
	e := newE2E(t, 3, automation.RunPolicy{MaxAttempts: 1})
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, pw, _ := r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"user": u, "password": pw, "authorization": r.Header.Get("Authorization"),
			"token": r.Header.Get("X-Api-Token"), "apiKey": r.URL.Query().Get("api_key"), "rawQuery": r.URL.RawQuery})
	}))
	defer echo.Close()
	secrets := []string{"lambda_basic_user", "lambda-basic-pass", "lambda-header-token", "lambda query/val"}
	conn := func(typ, value string) string {
		status, c := call(t, e.api, "POST", "/api/v1/connections", e.key, `{"name": "`+typ+`", "app": "echo", "type": "`+typ+`", "value": `+value+`}`)
		if status != 201 {
			t.Fatalf("create %s connection = %d %v", typ, status, c)
		}
		return c["id"].(string)
	}
	basic := conn("BASIC", `{"username": "lambda_basic_user", "password": "lambda-basic-pass"}`)
	header := conn("HEADER", `{"name": "X-Api-Token", "value": "lambda-header-token"}`)
	query := conn("QUERY", `{"name": "api_key", "value": "lambda query/val"}`)
	status, f := call(t, e.api, "POST", "/api/v1/flows", e.key, fmt.Sprintf(`{"name": "typed", "engine": "FLOW_BUILDER", "steps": [
		{"name": "basic", "type": "HTTP", "connectionId": %q, "url": %q},
		{"name": "header", "type": "HTTP", "connectionId": %q, "url": %q},
		{"name": "query", "type": "HTTP", "connectionId": %q, "url": %q}]}`, basic, echo.URL, header, echo.URL, query, echo.URL))
	if status != 201 {
		t.Fatalf("create flow = %d %v", status, f)
	}
	id := f["id"].(string)
	call(t, e.api, "POST", "/api/v1/flows/"+id+"/enable", e.key, "")
	run := e.runOnMoto(t, id)
	if run["status"] != "SUCCEEDED" {
		t.Fatalf("run = %v", run)
	}
	raw, _ := json.Marshal(run)
	for _, s := range append(secrets, url.QueryEscape("lambda query/val"), base64.StdEncoding.EncodeToString([]byte("lambda_basic_user:lambda-basic-pass"))) {
		if strings.Contains(string(raw), s) {
			t.Errorf("the run record shows %q: %s", s, raw)
		}
	}
	steps, _ := run["steps"].([]any)
	if len(steps) != 3 {
		t.Fatalf("steps = %v", run["steps"])
	}
	for i, field := range []string{"password", "token", "apiKey"} {
		out := steps[i].(map[string]any)["output"].(map[string]any)["body"].(map[string]any)
		if out[field] != automation.SecretMask {
			t.Errorf("step %d echoed %s = %v, want it masked", i, field, out[field])
		}
	}
}

// TestDashboardOnLambda: through the api function on moto, a dashboard
// sign-in and a failed one (a revoked key) are in the project's audit log
// with API Gateway's source IP; a viewer's session is refused a form with
// 403 naming the role, and its pages offer no such form.
func TestDashboardOnLambda(t *testing.T) {
	ctx := context.Background()
	st := newStack(t)
	api, err := management.NewHandler(ctx, st.aws, st.cfgOf("ApiFunction"))
	if err != nil {
		t.Fatal(err)
	}
	viewer, vk, err := st.svc.CreateAPIKeyWithRole(ctx, st.project.ID, automation.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	revoked, rk, err := st.svc.CreateAPIKeyWithRole(ctx, st.project.ID, automation.RoleEditor)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.svc.RevokeAPIKey(ctx, rk.ID); err != nil {
		t.Fatal(err)
	}
	form := page(t, api, "GET", "/ui/signin", "", "")
	m := csrfField.FindStringSubmatch(form.Body)
	if resp := page(t, api, "POST", "/ui/signin", cookie(form, "flow_signin"),
		url.Values{"apiKey": {revoked}, "csrf": {html.UnescapeString(m[1])}}.Encode()); resp.StatusCode != 401 {
		t.Fatalf("sign-in with a revoked key = %d", resp.StatusCode)
	}
	session := dashboardSession(t, api, viewer)
	f := st.flow(t, `{"name": "Deploy", "engine": "FLOW_BUILDER"}`, false)
	flowPage := page(t, api, "GET", "/ui/flows/"+f.ID, session, "")
	if flowPage.StatusCode != 200 || strings.Contains(flowPage.Body, "/enable\"") {
		t.Errorf("the viewer's flow page = %d, offering enable: %v", flowPage.StatusCode, strings.Contains(flowPage.Body, "/enable\""))
	}
	csrf := csrfField.FindStringSubmatch(flowPage.Body)
	if resp := page(t, api, "POST", "/ui/flows/"+f.ID+"/enable", session, url.Values{"csrf": {html.UnescapeString(csrf[1])}}.Encode()); resp.StatusCode != 403 ||
		!strings.Contains(resp.Body, "viewer") {
		t.Errorf("the viewer's enable = %d %.200s", resp.StatusCode, resp.Body)
	}
	l, err := st.svc.AuditLog(ctx, st.project, automation.AuditSearch{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Data) != 2 || l.Data[0].Action != "session.signin" || l.Data[0].Actor.KeyID != vk.ID ||
		l.Data[1].Action != "session.signin_failed" || l.Data[1].Actor.KeyID != rk.ID || l.Data[0].SourceIP != "198.51.100.10" {
		t.Errorf("audit log on DynamoDB = %+v", l.Data)
	}
}
