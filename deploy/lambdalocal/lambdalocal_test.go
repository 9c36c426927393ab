package lambdalocal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"flowservice/deploy/samenv"
)

// stageOf is a Stage over template src, without moto: Env and Event read
// only the template and the placeholders.
func stageOf(t *testing.T, src string) *Stage {
	t.Helper()
	tpl, err := samenv.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return &Stage{Name: "local", AWS: aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:5000")},
		tpl: tpl, values: samenv.Values{Params: map[string]string{"Stage": "local"}, Refs: map[string]string{}}}
}

// The environment is the template's, with AWS_ENDPOINT_URL set only
// because the template declares it, as sam's --env-vars does; and the
// runtime's variables come from the function's MemorySize and Timeout.
func TestEnvFollowsTheTemplate(t *testing.T) {
	const tpl = `
Globals:
  Function:
    MemorySize: 256
    Environment:
      Variables:
        STAGE: !Ref Stage
        AWS_ENDPOINT_URL: ""
Resources:
  ApiFunction:
    Type: AWS::Serverless::Function
    Properties:
      Timeout: 29
      Environment:
        Variables:
          EXTRA: !Sub "x-${Stage}"
`
	env, err := stageOf(t, tpl).Env("ApiFunction")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"STAGE": "local", "EXTRA": "x-local", "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256", "AWS_LAMBDA_FUNCTION_TIMEOUT": "29",
		"AWS_LAMBDA_FUNCTION_NAME": "flow-local-api", "AWS_REGION": "us-east-1",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}

	undeclared := strings.Replace(tpl, `        AWS_ENDPOINT_URL: ""`+"\n", "", 1)
	if _, err := stageOf(t, undeclared).Env("ApiFunction"); err == nil || !strings.Contains(err.Error(), "AWS_ENDPOINT_URL") {
		t.Errorf("template without AWS_ENDPOINT_URL: err %v, want it named", err)
	}
	if _, err := stageOf(t, tpl).Env("NoSuchFunction"); err == nil {
		t.Error("unknown function: no error")
	}
}

// The repository's template declares AWS_ENDPOINT_URL for every function.
func TestRepositoryTemplateDeclaresEndpoint(t *testing.T) {
	src, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := samenv.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	fns := tpl.Functions()
	if len(fns) != len(Functions) {
		t.Fatalf("template functions %v, Functions %v", fns, Functions)
	}
	for _, id := range Functions {
		if _, ok := tpl.Resources[id]; !ok {
			t.Errorf("Functions names %s, which the template lacks", id)
		}
	}
	if !strings.Contains(string(src), `AWS_ENDPOINT_URL: ""`) {
		t.Error(`template.yaml's Globals do not declare AWS_ENDPOINT_URL: ""`)
	}
}

// An event's placeholders are all filled, or the file is refused naming
// the one left.
func TestEventPlaceholders(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api-x.json")
	if err := os.WriteFile(path, []byte(`{"a": "__API_KEY__", "b": "__OTHER__", "c": "__init__"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Stage{Placeholders: map[string]string{"__API_KEY__": "fsk_1", "__OTHER__": "x"}}
	got, err := s.Event(path)
	if err != nil || string(got) != `{"a": "fsk_1", "b": "x", "c": "__init__"}` {
		t.Errorf("event %s, %v", got, err)
	}
	delete(s.Placeholders, "__OTHER__")
	if _, err := s.Event(path); err == nil || !strings.Contains(err.Error(), "__OTHER__") {
		t.Errorf("unfilled placeholder: err %v", err)
	}
	if fn := FunctionOf("events/workflowhook-head.json"); fn != "workflowhook" {
		t.Errorf("FunctionOf = %q", fn)
	}
}

// The emulator's REPORT line, as its printEndReports writes it: the
// cold start's Init Duration and Duration are read from it, and a line
// without Init Duration (a warm invocation) is not taken for one.
func TestParseReport(t *testing.T) {
	logs := "START RequestId: 1f Version: $LATEST\nEND RequestId: 1f\n" +
		"REPORT RequestId: 1f\tInit Duration: 0.42 ms\tDuration: 298.73 ms\tBilled Duration: 299 ms\tMemory Size: 512 MB\tMax Memory Used: 512 MB\t\n"
	init, dur, err := ParseReport(logs)
	if err != nil {
		t.Fatal(err)
	}
	if init != 420*time.Microsecond || dur != 298730*time.Microsecond {
		t.Errorf("init %v, duration %v; want 420µs, 298.73ms", init, dur)
	}
	if _, _, err := ParseReport("REPORT RequestId: 2a\tDuration: 3.10 ms\tBilled Duration: 4 ms\t\n"); err == nil {
		t.Error("a warm REPORT line was read as a cold start's")
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	if p := Percentile(ds, 50); p != 3 {
		t.Errorf("p50 %v, want 3", p)
	}
	if p := Percentile(ds, 100); p != 5 {
		t.Errorf("p100 %v, want 5", p)
	}
	if ds[0] != 5 {
		t.Error("Percentile sorted its argument")
	}
}
