package awsapp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/internal/dbtest"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
)

// TestAppsOnMoto is the Lambda path of apps, databases and mail: the api
// function lists the catalog and stores an app connection with its
// baseUrl (DynamoDB) and POSTGRES credentials (Secrets Manager); the
// runner function runs a flow whose ACTION step posts to Slack's double
// through baseUrl and whose SQL step reads a real PostgreSQL.
func TestAppsOnMoto(t *testing.T) {
	ctx := context.Background()
	pgPort := dbtest.StartPostgres(t)
	var (
		mu   sync.Mutex
		got  []string
		auth []string
	)
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.URL.Path+" "+string(b))
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, `{"ok": true, "ts": "1.5", "channel": "C1"}`)
	}))
	defer slack.Close()

	st := newMotoStage(t, "apps", awsapp.Config{Stage: "test", LogOutput: io.Discard, AllowPrivateNetworks: true})
	api, err := management.NewHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := awsapp.NewWebhookHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	call := func(h awsapp.ProxyHandler, method, path, body string, want int, out any) {
		t.Helper()
		resp, err := h(ctx, events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body,
			MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + st.Key}},
			RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: path,
				Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}})
		if err != nil || resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s %v, want %d", method, path, resp.StatusCode, resp.Body, err, want)
		}
		if out != nil {
			if err := json.Unmarshal([]byte(resp.Body), out); err != nil {
				t.Fatal(err)
			}
		}
	}
	var catalog struct {
		Items []struct {
			Key     string
			Actions []struct{ Key string }
		}
	}
	call(api, "GET", "/api/v1/apps", "", 200, &catalog)
	if len(catalog.Items) < 12 {
		t.Fatalf("%d apps in the catalog, want at least 12", len(catalog.Items))
	}
	var conn struct {
		ID           string
		BaseURL      string `json:"baseUrl"`
		AllowedHosts []string
	}
	call(api, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "slack", "app": "slack", "type": "API_KEY",
		"value": {"apiKey": "xoxb-secret-token"}, "baseUrl": %q}`, slack.URL), 201, &conn)
	call(api, "GET", "/api/v1/connections/"+conn.ID, "", 200, &conn)
	if conn.BaseURL != slack.URL || strings.Join(conn.AllowedHosts, ",") != "slack.com,127.0.0.1" {
		t.Errorf("stored connection %+v: want its baseUrl, and allowedHosts slack.com joined by 127.0.0.1", conn)
	}
	call(api, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "db", "app": "postgres", "type": "POSTGRES",
		"value": {"host": "127.0.0.1", "port": %d, "database": "postgres", "username": "postgres", "tls": "disable"}}`, pgPort), 201, nil)
	// A {{ in a statement is a 400 naming the field.
	call(api, "POST", "/api/v1/flows", `{"name": "bad", "engine": "FLOW_BUILDER", "steps": [
		{"name": "q", "type": "SQL", "connection": "db", "query": "select {{ trigger.body.x }}"}]}`, 400, nil)

	var f struct{ ID string }
	call(api, "POST", "/api/v1/flows", `{"name": "notify", "engine": "FLOW_BUILDER", "steps": [
		{"name": "q", "type": "SQL", "connection": "db", "query": "select upper($1) as who", "params": ["{{ trigger.body.who }}"]},
		{"name": "post", "type": "ACTION", "action": "slack.post_message", "connection": "slack",
		 "input": {"channel": "#ops", "text": "hello {{ steps.q.rows[0].who }}"}}]}`, 201, &f)
	call(api, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
	var accepted struct{ RunID string }
	call(hook, "POST", "/api/v1/webhooks/"+f.ID, `{"who": "ada"}`, 200, &accepted)

	sqsc := sqs.NewFromConfig(st.AWS)
	var r struct {
		Status, Error string
		Steps         []struct {
			Status, Error string
			Output        json.RawMessage
		}
	}
	for range 20 {
		call(api, "GET", "/api/v1/flows/"+f.ID+"/runs/"+accepted.RunID, "", 200, &r)
		if r.Status != "RUNNING" {
			break
		}
		if _, err := awsdev.PollOnce(ctx, sqsc, st.Cfg.QueueURL, time.Second, runner); err != nil {
			t.Fatal(err)
		}
	}
	if r.Status != "SUCCEEDED" {
		t.Fatalf("run %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || !strings.HasPrefix(got[0], "/api/chat.postMessage ") || !strings.Contains(got[0], `"text":"hello ADA"`) ||
		auth[0] != "Bearer xoxb-secret-token" {
		t.Errorf("Slack's double got %q with %q", got, auth)
	}
	if string(r.Steps[1].Output) != `{"channel":"C1","ts":"1.5"}` {
		t.Errorf("ACTION output %s", r.Steps[1].Output)
	}
}
