package deploy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStepsInVpc: the functions that run steps (runner and both
// receivers) join the VPC under the condition StepsInVpc (StepSubnetIds
// not empty), with the VPC access role; the others never (docs/aws.md,
// "Databases and mail"). The translation keeps the condition, which
// CloudFormation resolves.
func TestStepsInVpc(t *testing.T) {
	steps := []string{"RunnerFunction", "WebhookFunction", "WorkflowHookFunction"}
	tpl := translate(t, map[string]any{"StepSubnetIds": "subnet-1,subnet-2", "StepSecurityGroupIds": "sg-1"})
	fns := functions(tpl)
	for _, id := range steps {
		b, _ := json.Marshal(fns[id]["VpcConfig"])
		if !strings.HasPrefix(string(b), `{"Fn::If":["StepsInVpc",`) || !strings.Contains(string(b), "AWS::NoValue") ||
			!strings.Contains(string(b), "StepSubnetIds") || !strings.Contains(string(b), "StepSecurityGroupIds") {
			t.Errorf("%s: VpcConfig %s, want the step subnets and security groups", id, b)
		}
		role, _ := fns[id]["Role"].(map[string]any)["Fn::GetAtt"].([]any)
		if len(role) == 2 {
			rb, _ := json.Marshal(tpl.Resources[role[0].(string)].Properties)
			if !strings.Contains(string(rb), "AWSLambdaVPCAccessExecutionRole") {
				t.Errorf("%s: its role lacks the VPC access policy: %s", id, rb)
			}
		}
	}
	for _, id := range []string{"ApiFunction", "CodeFunction"} {
		if fns[id]["VpcConfig"] != nil {
			t.Errorf("%s: in the VPC, though it runs no steps", id)
		}
	}
}
