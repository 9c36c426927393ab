package deploy

import (
	"context"
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
