package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOnlyCodeFunctionLinksJavaScript keeps the JavaScript engine in the
// code function: the other functions reach it by Lambda Invoke, so that
// they stay small.
func TestOnlyCodeFunctionLinksJavaScript(t *testing.T) {
	for _, fn := range []string{"api", "webhook", "workflowhook", "runner", "code"} {
		out, err := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc", "../functions/"+fn).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", fn, err, out)
		}
		links := strings.Contains(string(out), "github.com/dop251/goja\n")
		if links != (fn == "code") {
			t.Errorf("%s links goja: %v, want only the code function to", fn, links)
		}
	}
}

// TestCodeBootstrap builds the code function's bootstrap, starts it against
// the local Runtime API and sends it events/code-invoke.json: the script
// runs in a child process of the bootstrap, as on Lambda.
func TestCodeBootstrap(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w", "-o", bin, "../functions/code")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	raw, err := os.ReadFile("../events/code-invoke.json")
	if err != nil {
		t.Fatal(err)
	}
	rt := newRuntimeAPI(t, raw)
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(rt.srv.URL, "http://"),
		"AWS_LAMBDA_FUNCTION_NAME=flow-test-code", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512",
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST", "STAGE=test",
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	select {
	case <-rt.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("no answer from the code bootstrap within 60 s\n%s", stderr.String())
	}
	rt.mu.Lock()
	respBody, errBody := rt.response, rt.errBody
	rt.mu.Unlock()
	if errBody != "" {
		t.Fatalf("the function reported an error: %s", errBody)
	}
	var res struct {
		Output struct{ Type, Signed string }
		Logs   []string
		Error  string
	}
	if err := json.Unmarshal(respBody, &res); err != nil {
		t.Fatalf("response %s: %v", respBody, err)
	}
	if res.Error != "" || res.Output.Type != "invoice.paid" || len(res.Output.Signed) != 64 ||
		len(res.Logs) != 1 || res.Logs[0] != "event invoice.paid" {
		t.Errorf("code function answered %s", respBody)
	}
}
