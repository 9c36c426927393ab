package httpapi

import (
	"bytes"
	"net/http"
	"testing"

	"flowservice/pkg/automation"
)

// TestVersionRoutes: drafts, publish, history and restore through the API,
// their error envelopes, and a call to the workflow builder test URL that
// runs the draft while the live URL runs the live version.
func TestVersionRoutes(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	f := createFlow(t, h.api, h.key, workflowFlow("versions-wf", "POST", "",
		`[{"name":"live","type":"SET","values":{"v":"live"}}]`))
	base := "/api/v1/flows/" + f.ID
	call(t, h.api, "POST", base+"/enable", h.key, "").into(t, 200, &struct{}{})

	call(t, h.api, "GET", base+"/draft", h.key, "").wantError(t, 404, "DRAFT_NOT_FOUND")
	call(t, h.api, "POST", base+"/publish", h.key, "").wantError(t, 409, "DRAFT_NOT_FOUND")
	call(t, h.api, "DELETE", base+"/draft", h.key, "").wantError(t, 404, "DRAFT_NOT_FOUND")
	call(t, h.api, "PUT", base+"/draft", h.key, `{"steps":[{"name":"x","type":"SEND"}]}`).wantError(t, 400, "VALIDATION_ERROR")
	call(t, h.api, "PUT", base+"/draft", h.key, `{"stepz":[]}`).wantError(t, 400, "")
	call(t, h.api, "GET", base+"/versions/zero", h.key, "").wantError(t, 400, "INVALID_PARAMETER")
	call(t, h.api, "GET", base+"/versions/9", h.key, "").wantError(t, 404, "VERSION_NOT_FOUND")
	call(t, h.api, "POST", base+"/versions/9/restore", h.key, "").wantError(t, 404, "VERSION_NOT_FOUND")
	call(t, h.api, "GET", "/api/v1/flows/flw_missing/versions", h.key, "").wantError(t, 404, "FLOW_NOT_FOUND")
	call(t, h.api, "GET", base+"/versions?limit=0", h.key, "").wantError(t, 400, "INVALID_PARAMETER")

	var d automation.Draft
	call(t, h.api, "PUT", base+"/draft", h.key, `{"steps":[{"name":"drafted","type":"SET","values":{"v":"draft"}}]}`).into(t, 200, &d)
	if d.FlowID != f.ID || d.BasedOn != 1 || len(d.Steps) != 1 || d.Steps[0].Name != "drafted" || d.Trigger.Webhook == nil {
		t.Fatalf("saved draft = %+v", d)
	}

	// The test URL runs the draft; the live URL the live version.
	h.arm(t, f.ID)
	testRun := call(t, h.workflow, "POST", "/webhook-test/versions-wf", "", `{}`).started(t)
	liveRun := call(t, h.workflow, "POST", "/webhook/versions-wf", "", `{}`).started(t)
	drain(t, h.svc, h.runs)
	tr, lr := h.run(t, f.ID, testRun), h.run(t, f.ID, liveRun)
	if !tr.Draft || tr.FlowVersion != nil || len(tr.Steps) != 1 || tr.Steps[0].Name != "drafted" {
		t.Errorf("test URL run: draft %v flowVersion %v steps %+v", tr.Draft, tr.FlowVersion, tr.Steps)
	}
	if lr.Draft || lr.FlowVersion == nil || *lr.FlowVersion != 1 || len(lr.Steps) != 1 || lr.Steps[0].Name != "live" {
		t.Errorf("live URL run: draft %v flowVersion %v steps %+v", lr.Draft, lr.FlowVersion, lr.Steps)
	}
	raw := call(t, h.api, "GET", base+"/runs/"+testRun, h.key, "")
	if raw.status != http.StatusOK || !bytes.Contains(raw.body, []byte(`"draft":true`)) || !bytes.Contains(raw.body, []byte(`"flowVersion":null`)) || bytes.Contains(raw.body, []byte("draftDefinition")) {
		t.Errorf("test run as the API shows it: %s", raw.body)
	}

	var pub struct {
		Version  int64
		HasDraft bool
	}
	call(t, h.api, "POST", base+"/publish", h.key, `{"message":"drafted"}`).into(t, 200, &pub)
	if pub.Version != 2 || pub.HasDraft {
		t.Fatalf("publish = %+v", pub)
	}
	call(t, h.api, "POST", base+"/versions/1/restore", h.key, "").into(t, 200, &pub)
	if pub.Version != 3 {
		t.Fatalf("restore = %+v", pub)
	}
	var list struct {
		Data []automation.FlowVersion
	}
	call(t, h.api, "GET", base+"/versions", h.key, "").into(t, 200, &list)
	if len(list.Data) != 3 || list.Data[0].Message != "restored from version 1" || list.Data[1].Message != "drafted" || list.Data[0].Definition != nil {
		t.Fatalf("versions = %+v", list.Data)
	}
	var v automation.FlowVersion
	call(t, h.api, "GET", base+"/versions/2", h.key, "").into(t, 200, &v)
	if v.Definition == nil || len(v.Definition.Steps) != 1 || v.Definition.Steps[0].Name != "drafted" {
		t.Fatalf("version 2 = %+v", v)
	}
}
