package deploy

import (
	"context"
	"strings"
	"testing"

	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/lambdacode"
)

// TestCodeCheckOnLambdaPath: the api function, which carries no
// JavaScript engine, refuses a CODE step that does not compile with a 400
// naming the step, by asking the code function (invoked as IAM would
// authorize it); code that compiles is saved. Its call is the api
// function's use of lambda:InvokeFunction in TestGrantsMatchObservedCalls.
func TestCodeCheckOnLambdaPath(t *testing.T) {
	recordGrants(t)
	ctx := context.Background()
	st := newStack(t)
	code := newCodeFunction(t)
	cfg := st.cfgOf("ApiFunction")
	cfg.Code = lambdacode.New(code.endpoint(t, "ApiFunction"), codeFunctionName)
	api, err := management.NewHandler(ctx, st.aws, cfg)
	if err != nil {
		t.Fatal(err)
	}
	status, b := call(t, api, "POST", "/api/v1/flows", st.key, `{"name": "Verify", "engine": "FLOW_BUILDER",
		"steps": [{"name": "verify", "type": "CODE", "code": "return {"}]}`)
	msg, _ := b["error"].(map[string]any)["message"].(string)
	if status != 400 || !strings.Contains(msg, "steps[0].code") || !strings.Contains(msg, "SyntaxError") {
		t.Fatalf("a script that does not compile = %d %v, want 400 naming steps[0].code with the SyntaxError", status, b)
	}
	status, b = call(t, api, "POST", "/api/v1/flows", st.key, `{"name": "Verify", "engine": "FLOW_BUILDER",
		"steps": [{"name": "verify", "type": "CODE", "code": "if (!timingSafeEqual(hmacSHA256Hex('s', trigger.rawBody), trigger.headers['x-signature'] || '')) throw new Error('Invalid webhook signature');\nreturn {ok: true};"}]}`)
	if status != 201 {
		t.Fatalf("a script that compiles = %d %v", status, b)
	}
}
