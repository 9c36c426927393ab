package samenv

import (
	"strings"
	"testing"
)

const tpl = `
Parameters:
  Stage: {Type: String, Default: dev}
  Cidrs: {Type: CommaDelimitedList, Default: "10.0.0.0/8"}
Globals:
  Function:
    Environment:
      Variables:
        STAGE: !Ref Stage
        TABLE: !Ref FlowsTable
        LEVEL: info
        EXTRA: ""
Resources:
  FlowsTable: {Type: AWS::DynamoDB::Table}
  Queue: {Type: AWS::SQS::Queue}
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Environment:
        Variables:
          LEVEL: debug
          QUEUE_ARN: !GetAtt Queue.Arn
          URL: !Sub https://${Api}.execute-api.${AWS::Region}.${AWS::URLSuffix}/${Stage}
          CIDRS: !Join [",", !Ref Cidrs]
Outputs:
  FlowsTable: {Value: !Ref FlowsTable}
  QueueArn: {Value: !GetAtt Queue.Arn}
  Api: {Value: !Ref Api}
`

// TestEnvFromStack resolves a function's variables from describe-stacks
// output: its own over Globals, Ref, GetAtt (the "<Id>Arn" output), Sub
// with pseudo parameters from the stack ID, Join over a list parameter.
func TestEnvFromStack(t *testing.T) {
	tp, err := Parse([]byte(tpl))
	if err != nil {
		t.Fatal(err)
	}
	v, err := tp.FromStack([]byte(`{"Stacks": [{"StackId": "arn:aws:cloudformation:eu-west-1:111122223333:stack/s/1",
		"Parameters": [{"ParameterKey": "Stage", "ParameterValue": "prod"}, {"ParameterKey": "Cidrs", "ParameterValue": "192.0.2.0/24,198.51.100.0/24"}],
		"Outputs": [{"OutputKey": "FlowsTable", "OutputValue": "flow-prod-flows"}, {"OutputKey": "QueueArn", "OutputValue": "arn:aws:sqs:eu-west-1:111122223333:q"},
			{"OutputKey": "Api", "OutputValue": "abc123"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	env, err := tp.Env(v, map[string]string{"EXTRA": "x"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"STAGE": "prod", "TABLE": "flow-prod-flows", "LEVEL": "debug", "QUEUE_ARN": "arn:aws:sqs:eu-west-1:111122223333:q",
		"URL": "https://abc123.execute-api.eu-west-1.amazonaws.com/prod", "CIDRS": "192.0.2.0/24,198.51.100.0/24", "EXTRA": "x",
	}
	for k, w := range want {
		if env["Fn"][k] != w {
			t.Errorf("%s = %q, want %q", k, env["Fn"][k], w)
		}
	}
	if len(env["Fn"]) != len(want) {
		t.Errorf("env = %v", env["Fn"])
	}

	// A resource the stack does not output is an error, not a logical ID.
	v.Refs = map[string]string{}
	if _, err := tp.Env(v, nil); err == nil || !strings.Contains(err.Error(), "no value for") {
		t.Errorf("missing output: %v", err)
	}
	if _, err := tp.FromStack([]byte(`{"Stacks": []}`)); err == nil {
		t.Error("no stack: no error")
	}
}

// An override the template does not declare is refused: sam's --env-vars
// would drop it, and the function would run without it (AWS_ENDPOINT_URL:
// against real AWS).
func TestEnvRefusesUndeclaredOverride(t *testing.T) {
	tp, err := Parse([]byte(tpl))
	if err != nil {
		t.Fatal(err)
	}
	v := Values{Params: Pseudo("us-east-1", "123456789012", "aws"), Refs: map[string]string{
		"FlowsTable": "flows", "Queue.Arn": "arn:q", "Api": "abc"}}
	v.Params["Stage"], v.Params["Cidrs"] = "dev", "10.0.0.0/8"
	if _, err := tp.Env(v, map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"}); err == nil || !strings.Contains(err.Error(), "AWS_ENDPOINT_URL") {
		t.Errorf("undeclared AWS_ENDPOINT_URL: err %v, want it named", err)
	}
	env, err := tp.Env(v, map[string]string{"LEVEL": "warn"})
	if err != nil || env["Fn"]["LEVEL"] != "warn" {
		t.Errorf("declared override: %v, %v", env["Fn"], err)
	}
}
