package deploy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
)

// TestEnvironmentsOnMoto drives docs/environments.md through the Lambda
// handlers on moto: project variables (a secret one in Secrets Manager,
// never returned), a run that reads them and names its connection, the
// run record masking the secret, a workflow webhook whose authentication
// is a variable, and a flow's export imported again.
func TestEnvironmentsOnMoto(t *testing.T) {
	recordGrants(t)
	e := newE2E(t, 3, automation.RunPolicy{MaxAttempts: 1})
	workflowHook, err := awsapp.NewWorkflowHookHandler(t.Context(), e.aws, e.cfgOf("WorkflowHookFunction"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	ext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Token"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"echo":"`+r.Header.Get("X-Token")+`"}`)
	}))
	t.Cleanup(ext.Close)

	put := func(name, body string) map[string]any {
		t.Helper()
		status, v := call(t, e.api, "PUT", "/api/v1/variables/"+name, e.key, body)
		if status != 200 {
			t.Fatalf("PUT variable %s = %d %v", name, status, v)
		}
		return v
	}
	if v := put("BASE_URL", fmt.Sprintf(`{"value": %q}`, ext.URL+"/stage")); v["value"] != ext.URL+"/stage" || v["secret"] != false {
		t.Errorf("plain variable = %v", v)
	}
	if v := put("TOKEN", `{"value": "tok-moto-9a8b7c", "secret": true}`); v["secret"] != true || v["value"] != nil {
		t.Errorf("secret variable = %v: want no value", v)
	}
	put("HOOK_TOKEN", `{"value": "hook-moto-1d2e3f", "secret": true}`)
	status, l := call(t, e.api, "GET", "/api/v1/variables", e.key, "")
	if raw, _ := json.Marshal(l); status != 200 || len(l["data"].([]any)) != 3 || strings.Contains(string(raw), "tok-moto") {
		t.Fatalf("list = %d %s", status, raw)
	}
	if status, v := call(t, e.api, "PUT", "/api/v1/variables/9bad", e.key, `{"value": "x"}`); status != 400 {
		t.Errorf("bad name = %d %v", status, v)
	}

	status, con := call(t, e.api, "POST", "/api/v1/connections", e.key, `{"name": "Chat", "app": "chat", "type": "API_KEY", "value": {"apiKey": "key-moto-4455"}}`)
	if status != 201 {
		t.Fatalf("connection = %d %v", status, con)
	}
	status, f := call(t, e.api, "POST", "/api/v1/flows", e.key, `{"name": "Notify", "engine": "FLOW_BUILDER", "steps": [
		{"name": "send", "type": "HTTP", "connection": "Chat", "method": "POST", "url": "{{ vars.BASE_URL }}/messages",
		 "headers": {"X-Token": "{{ vars.TOKEN }}"}}]}`)
	if status != 201 {
		t.Fatalf("create flow = %d %v", status, f)
	}
	flowID := f["id"].(string)
	if status, g := call(t, e.api, "POST", "/api/v1/flows/"+flowID+"/enable", e.key, ""); status != 200 {
		t.Fatalf("enable = %d %v", status, g)
	}
	status, acc := call(t, e.hook, "POST", "/api/v1/webhooks/"+flowID, "", `{}`)
	if status != 200 {
		t.Fatalf("webhook = %d %v", status, acc)
	}
	delivered := 0
	for i := 0; i < 5 && delivered == 0; i++ {
		delivered = e.poll(t)
	}
	resp, err := e.api(t.Context(), proxyRequest("GET", "/api/v1/flows/"+flowID+"/runs/"+acc["runId"].(string), e.key, ""))
	if err != nil {
		t.Fatal(err)
	}
	var run struct{ Status, Error string }
	if err := json.Unmarshal([]byte(resp.Body), &run); err != nil || run.Status != "SUCCEEDED" {
		t.Fatalf("run = %s (%v)", resp.Body, err)
	}
	if strings.Contains(resp.Body, "tok-moto-9a8b7c") || strings.Contains(resp.Body, "key-moto-4455") {
		t.Errorf("the run record holds a secret: %s", resp.Body)
	}
	mu.Lock()
	calls := strings.Join(got, "\n")
	mu.Unlock()
	if calls != "/stage/messages Bearer key-moto-4455 tok-moto-9a8b7c" {
		t.Errorf("the service got %q", calls)
	}

	// A workflow webhook authenticated by a secret variable, through the
	// workflowhook function.
	status, w := call(t, e.api, "POST", "/api/v1/flows", e.key, `{"name": "Orders", "engine": "WORKFLOW_BUILDER", "trigger": {"type": "WEBHOOK",
		"webhook": {"httpMethod": "POST", "path": "orders", "responseMode": "ON_COMPLETION",
		 "authentication": {"type": "HEADER", "name": "X-Hook-Token", "value": "{{ vars.HOOK_TOKEN }}"}}},
		"steps": [{"name": "send", "type": "HTTP", "connection": "Chat", "method": "POST", "url": "{{ vars.BASE_URL }}/orders"}]}`)
	if status != 201 {
		t.Fatalf("create workflow flow = %d %v", status, w)
	}
	call(t, e.api, "POST", "/api/v1/flows/"+w["id"].(string)+"/enable", e.key, "")
	hookCall := func(token string) int {
		req := proxyRequest("POST", "/webhook/orders", "", `{}`)
		req.MultiValueHeaders["X-Hook-Token"] = []string{token}
		resp, err := workflowHook(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	// ON_COMPLETION: the run executes in the workflowhook function, which
	// resolves the connection's name there.
	if s := hookCall("hook-moto-1d2e3f"); s != 200 {
		t.Errorf("workflow webhook with the variable's value = %d", s)
	}
	mu.Lock()
	calls = strings.Join(got, "\n")
	mu.Unlock()
	if !strings.HasSuffix(calls, "\n/stage/orders Bearer key-moto-4455 ") {
		t.Errorf("the service got %q", calls)
	}
	if s := hookCall("{{ vars.HOOK_TOKEN }}"); s != 401 {
		t.Errorf("workflow webhook with the reference itself = %d", s)
	}

	// Export names the connection and keeps the references; the document
	// imports again as an INACTIVE flow.
	resp, err = e.api(t.Context(), proxyRequest("GET", "/api/v1/flows/"+flowID+"/export", e.key, ""))
	if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, `"connection":"Chat"`) || strings.Contains(resp.Body, con["id"].(string)) {
		t.Fatalf("export = %d %s (%v)", resp.StatusCode, resp.Body, err)
	}
	doc := strings.Replace(resp.Body, `"name":"Notify"`, `"name":"Notify copy"`, 1)
	if status, g := call(t, e.api, "POST", "/api/v1/flows/import", e.key, doc); status != 201 || g["status"] != "INACTIVE" || g["name"] != "Notify copy" {
		t.Errorf("import = %d %v", status, g)
	}
	resp, _ = e.api(t.Context(), proxyRequest("GET", "/api/v1/flows/"+w["id"].(string)+"/export", e.key, ""))
	if !strings.Contains(resp.Body, `{{ vars.HOOK_TOKEN }}`) {
		t.Errorf("export of the workflow flow = %s: want the variable reference", resp.Body)
	}

	if status, _ := call(t, e.api, "DELETE", "/api/v1/variables/TOKEN", e.key, ""); status != 204 {
		t.Errorf("delete = %d", status)
	}
	if status, v := call(t, e.api, "GET", "/api/v1/variables/TOKEN", e.key, ""); status != 404 {
		t.Errorf("get deleted = %d %v", status, v)
	}
}
