package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/deploy/lambdalocal"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awstest"
)

// lambdaResponseLimit is what Lambda returns at most from a synchronous
// invocation (6 MiB + 100 bytes); the emulator enforces it as Lambda does.
const lambdaResponseLimit = 6*1024*1024 + 100

// emulatedAPI is the api function's real bootstrap under the Runtime
// Interface Emulator, on a stage of the shared moto_server.
func emulatedAPI(t *testing.T) (*lambdalocal.Stage, *lambdalocal.Emulator) {
	t.Helper()
	ctx := context.Background()
	src, err := os.ReadFile("../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 4)
	_, _ = rand.Read(raw)
	stage, err := lambdalocal.NewStage(ctx, awstest.Start(t), src, "e"+hex.EncodeToString(raw))
	if err != nil {
		t.Fatal(err)
	}
	rie, err := lambdalocal.EnsureEmulator(ctx, "../bin/tools")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := lambdalocal.Build(ctx, "..", t.TempDir(), "api")
	if err != nil {
		t.Fatal(err)
	}
	env, err := stage.Env("ApiFunction")
	if err != nil {
		t.Fatal(err)
	}
	em, err := lambdalocal.Start(rie, bin, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := em.Stop(); err != nil {
			t.Error(err)
		}
	})
	return stage, em
}

// getEvent is api-get-flow.json as a GET of path with query.
func getEvent(t *testing.T, stage *lambdalocal.Stage, path string, query map[string]string) []byte {
	t.Helper()
	raw, err := stage.Event("../events/api-get-flow.json")
	if err != nil {
		t.Fatal(err)
	}
	var req events.APIGatewayProxyRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	req.Path, req.QueryStringParameters, req.MultiValueQueryStringParameters = path, query, nil
	if query != nil {
		req.MultiValueQueryStringParameters = map[string][]string{}
		for k, v := range query {
			req.MultiValueQueryStringParameters[k] = []string{v}
		}
	}
	out, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// emulatedGet invokes the emulated api with a GET and checks the answer
// stays within Lambda's limit and the budget.
func emulatedGet(t *testing.T, stage *lambdalocal.Stage, em *lambdalocal.Emulator, path string, query map[string]string) events.APIGatewayProxyResponse {
	t.Helper()
	payload, err := em.Invoke(context.Background(), getEvent(t, stage, path, query))
	var fe *lambdalocal.FunctionError
	if errors.As(err, &fe) {
		t.Fatalf("GET %s %v: the invocation failed: %v\n%s", path, query, err, em.Logs())
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(payload) > awsapp.ResponseBudget+64<<10 || len(payload) >= lambdaResponseLimit {
		t.Errorf("GET %s %v: answer %d bytes, over the budget %d", path, query, len(payload), awsapp.ResponseBudget)
	}
	var resp events.APIGatewayProxyResponse
	if err := json.Unmarshal(payload, &resp); err != nil {
		t.Fatalf("answer %.200s: %v", payload, err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s %v: status %d %.300s", path, query, resp.StatusCode, resp.Body)
	}
	return resp
}

// htmlBody is a JSON trigger body of about n bytes whose one string is
// HTML: quotes, <, > and &, which encoding/json would escape as 6 bytes.
func htmlBody(n int) (json.RawMessage, string) {
	const unit = `<div class="row"><a href="/x?a=1&b=2">item</a> &amp; more</div>`
	html := strings.Repeat(unit, n/(len(unit)+len(`\"`)*4))
	b, _ := json.Marshal(map[string]string{"html": html})
	return b, html
}

// TestRunAnswersFitLambdaUnderEmulator is the two runs, read back
// through the api function's real bootstrap under the emulator (which
// fails an answer over 6 MiB as Lambda does): a 1.2 MB HTML-ish body comes
// back whole and unescaped; a 4.16 MB body comes back within the budget,
// the cut part reachable by its href, piece by piece, to the last byte.
// (pkg/respbudget's TestFit cuts 8 MiB of step outputs; pkg/awsapp's
// TestLargeAnswersOnMoto and pkg/httpapi's TestLargeAnswersOnFlowd check
// the same answers with a small budget.)
func TestRunAnswersFitLambdaUnderEmulator(t *testing.T) {
	ctx := context.Background()
	stage, em := emulatedAPI(t)
	flowID := stage.Placeholders["__FLOW_ID__"]
	runPath := func(id string) string { return "/api/v1/flows/" + flowID + "/runs/" + id }

	t.Run("1.2 MB HTML body", func(t *testing.T) {
		body, html := htmlBody(1_200_000)
		run, err := stage.QueuedRun(ctx, flowID, body)
		if err != nil {
			t.Fatal(err)
		}
		resp := emulatedGet(t, stage, em, runPath(run.ID), nil)
		if strings.Contains(resp.Body, `\u003c`) || strings.Contains(resp.Body, `"truncated"`) {
			t.Errorf("answer escapes HTML or is cut (%d bytes)", len(resp.Body))
		}
		var got struct {
			Trigger struct{ Body struct{ HTML string } }
		}
		if err := json.Unmarshal([]byte(resp.Body), &got); err != nil || got.Trigger.Body.HTML != html {
			t.Errorf("trigger body came back %d bytes (%v), want the %d sent", len(got.Trigger.Body.HTML), err, len(html))
		}
	})

	t.Run("4.16 MB body", func(t *testing.T) {
		body, html := htmlBody(4_160_000)
		run, err := stage.QueuedRun(ctx, flowID, body)
		if err != nil {
			t.Fatal(err)
		}
		resp := emulatedGet(t, stage, em, runPath(run.ID), nil)
		var got struct {
			Trigger struct{ Body json.RawMessage }
		}
		if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
			t.Fatal(err)
		}
		if s := readWhole(t, stage, em, runPath(run.ID), got.Trigger.Body, "/trigger/body", "/html"); s != html {
			t.Errorf("the body read back is %d bytes, want the %d sent", len(s), len(html))
		}
	})

	// Quotes double in the proxy response (\" becomes \\\"): 4.16 MB of them
	// is over the budget, so the body is cut and read back in pieces.
	t.Run("4.16 MB of quotes", func(t *testing.T) {
		quotes := strings.Repeat(`"`, 4_160_000/2)
		body, _ := json.Marshal(map[string]string{"html": quotes})
		run, err := stage.QueuedRun(ctx, flowID, body)
		if err != nil {
			t.Fatal(err)
		}
		resp := emulatedGet(t, stage, em, runPath(run.ID), nil)
		if !strings.Contains(resp.Body, `"truncated":true`) {
			t.Fatalf("answer of %d bytes is not cut", len(resp.Body))
		}
		var got struct {
			Trigger struct{ Body json.RawMessage }
		}
		if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
			t.Fatal(err)
		}
		if s := readWhole(t, stage, em, runPath(run.ID), got.Trigger.Body, "/trigger/body", "/html"); s != quotes {
			t.Errorf("the body read back is %d bytes, want the %d sent", len(s), len(quotes))
		}
	})
}

// readWhole returns the string at field (a pointer within the part) of a
// part of a run answer: from v when it is whole, else by following its
// marker's href and each piece's next.
func readWhole(t *testing.T, stage *lambdalocal.Stage, em *lambdalocal.Emulator, path string, v json.RawMessage, part, field string) string {
	t.Helper()
	var marker struct {
		Truncated bool
		Part      string
		Href      string
	}
	_ = json.Unmarshal(v, &marker)
	if !marker.Truncated {
		var m map[string]any
		if err := json.Unmarshal(v, &m); err != nil {
			t.Fatalf("%s: %v", part, err)
		}
		if inner, ok := m[strings.TrimPrefix(field, "/")].(map[string]any); ok && inner["truncated"] == true {
			return readPieces(t, stage, em, path, inner["href"].(string))
		}
		s, _ := m[strings.TrimPrefix(field, "/")].(string)
		return s
	}
	if marker.Part != part || !strings.HasPrefix(marker.Href, path+"?part=") {
		t.Fatalf("marker %+v, want part %s and an href on %s", marker, part, path)
	}
	u, err := url.Parse(marker.Href)
	if err != nil {
		t.Fatal(err)
	}
	resp := emulatedGet(t, stage, em, u.Path, map[string]string{"part": u.Query().Get("part")})
	var whole struct {
		Part  string
		Value json.RawMessage
	}
	if err := json.Unmarshal([]byte(resp.Body), &whole); err != nil || whole.Part != part {
		t.Fatalf("GET %s: %.200s (%v), want the part %s", marker.Href, resp.Body, err, part)
	}
	return readWhole(t, stage, em, path, whole.Value, part, field)
}

// readPieces follows a string part's pieces from href to the end.
func readPieces(t *testing.T, stage *lambdalocal.Stage, em *lambdalocal.Emulator, path, href string) string {
	t.Helper()
	var sb strings.Builder
	for href != "" {
		u, err := url.Parse(href)
		if err != nil {
			t.Fatal(err)
		}
		q := map[string]string{}
		for k, v := range u.Query() {
			q[k] = v[0]
		}
		resp := emulatedGet(t, stage, em, u.Path, q)
		var p struct {
			Value  string
			Next   string
			Offset int
		}
		if err := json.Unmarshal([]byte(resp.Body), &p); err != nil {
			t.Fatalf("piece %s: %v %.200s", href, err, resp.Body)
		}
		if p.Offset != sb.Len() {
			t.Fatalf("piece at offset %d, want %d", p.Offset, sb.Len())
		}
		sb.WriteString(p.Value)
		href = p.Next
	}
	return sb.String()
}

// TestReceiverLargestAnswerFits: a receiver answers what a RESPOND step
// says, and a RESPOND body is capped (about 1.1 MB of JSON): the largest,
// all quotes (each doubled in the body and again in the proxy response),
// is still an answer within Lambda's 6 MB. The receivers' query strings
// are the sender's: the api function's part parameter means nothing there.
func TestReceiverLargestAnswerFits(t *testing.T) {
	st := newStack(t)
	h, err := awsapp.NewWorkflowHookHandler(context.Background(), st.aws, st.cfgOf("WorkflowHookFunction"))
	if err != nil {
		t.Fatal(err)
	}
	st.flow(t, `{"name": "Echo", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "deploys/github", "responseMode": "ON_COMPLETION"}},
		"steps": [{"name": "reply", "type": "RESPOND", "statusCode": 200, "body": {"echo": "{{ trigger.body.data }}", "part": "{{ trigger.query.part }}"}}]}`, true)
	send := func(data string) events.APIGatewayProxyResponse {
		var req events.APIGatewayProxyRequest
		if err := json.Unmarshal(event(t, "workflowhook-post.json", nil), &req); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]string{"data": data})
		req.Body, req.IsBase64Encoded = string(b), false
		req.QueryStringParameters = map[string]string{"part": "/x"}
		req.MultiValueQueryStringParameters = map[string][]string{"part": {"/x"}}
		raw, _ := json.Marshal(req)
		return invoke(t, h, raw)
	}
	quotes := strings.Repeat(`"`, 550_000)
	resp := send(quotes)
	out, _ := json.Marshal(resp)
	var got map[string]string
	if err := json.Unmarshal([]byte(resp.Body), &got); err != nil || resp.StatusCode != 200 || got["echo"] != quotes || got["part"] != "/x" {
		t.Fatalf("largest echo: %d %.200s (%v)", resp.StatusCode, resp.Body, err)
	}
	if len(out) >= lambdaResponseLimit || len(out) > awsapp.ResponseBudget {
		t.Errorf("largest RESPOND answer is %d bytes as Lambda returns it, over the budget %d", len(out), awsapp.ResponseBudget)
	}
	// Over the RESPOND cap: the run fails, and the answer says so.
	if resp := send(strings.Repeat(`"`, 600_000)); resp.StatusCode != 500 || !strings.Contains(resp.Body, "RESPOND") {
		t.Errorf("over the RESPOND cap: %d %.200s", resp.StatusCode, resp.Body)
	}
}
