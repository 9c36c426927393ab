package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// TestCallFlowValidation saves CALL_FLOW steps through the API: a flow of
// the project (or the flow itself) is accepted with wait filled in, and
// each mistake is a 400 naming the field.
func TestCallFlowValidation(t *testing.T) {
	srv, key := newTestServer(t)
	child := createFlow(t, srv, key, `{"name":"child","engine":"FLOW_BUILDER"}`)
	other := createFlow(t, srv, newProjectKey(t, srv, "ENTERPRISE"), `{"name":"theirs","engine":"FLOW_BUILDER"}`)

	step := func(fields string) string {
		return `{"name":"parent","engine":"FLOW_BUILDER","steps":[{"name":"enrich","type":"CALL_FLOW"` + fields + `}]}`
	}
	tests := []struct {
		name, body string
		wantInMsg  string
	}{
		{"missing flowId", step(``), "steps[0].flowId is required"},
		{"unknown flow", step(`,"flowId":"flw_doesnotexist"`), `steps[0].flowId "flw_doesnotexist": this project has no flow`},
		{"another project's flow", step(`,"flowId":"` + other.ID + `"`), `steps[0].flowId "` + other.ID + `": this project has no flow`},
		{"wait not boolean", step(`,"flowId":"` + child.ID + `","wait":"yes"`), "wait"},
		{"input template", step(`,"flowId":"` + child.ID + `","input":{"a":"{{ trigger.body. }}"}`), "steps[0].input.a"},
		{"field of another type", step(`,"flowId":"` + child.ID + `","url":"https://example.com"`), "url does not apply to CALL_FLOW"},
		{"waiting inside FOR_EACH", `{"name":"p","engine":"FLOW_BUILDER","steps":[{"name":"each","type":"FOR_EACH","items":"trigger.body.items",
			"steps":[{"name":"enrich","type":"CALL_FLOW","flowId":"` + child.ID + `"}]}]}`, "cannot run inside FOR_EACH"},
		{"waiting in onError", `{"name":"p","engine":"FLOW_BUILDER","onError":[{"name":"enrich","type":"CALL_FLOW","flowId":"` + child.ID + `"}]}`, "onError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := call(t, srv, "POST", "/api/v1/flows", key, tt.body).wantError(t, http.StatusBadRequest, "")
			if !strings.Contains(e.Message, tt.wantInMsg) {
				t.Errorf("message %q, want it to say %q", e.Message, tt.wantInMsg)
			}
		})
	}

	t.Run("accepted, wait defaults to true", func(t *testing.T) {
		var f struct {
			ID    string
			Steps []struct {
				FlowID string `json:"flowId"`
				Wait   *bool  `json:"wait"`
			}
		}
		call(t, srv, "POST", "/api/v1/flows", key, step(`,"flowId":"`+child.ID+`","input":{"id":"{{ trigger.body.id }}"}`)).
			into(t, http.StatusCreated, &f)
		if len(f.Steps) != 1 || f.Steps[0].FlowID != child.ID || f.Steps[0].Wait == nil || !*f.Steps[0].Wait {
			t.Fatalf("saved steps %+v, want flowId %s and wait true", f.Steps, child.ID)
		}
		// The flow may call itself: its runs are bounded by depth.
		self := fmt.Sprintf(`{"steps":[{"name":"again","type":"CALL_FLOW","flowId":%q,"wait":false}]}`, f.ID)
		call(t, srv, "POST", "/api/v1/flows/"+f.ID, key, self).into(t, http.StatusOK, &f)
		if len(f.Steps) != 1 || f.Steps[0].FlowID != f.ID || f.Steps[0].Wait == nil || *f.Steps[0].Wait {
			t.Fatalf("saved steps %+v, want a call of itself without wait", f.Steps)
		}
	})
}

// TestCalledRunAsTheAPIShowsIt reads a child run through the validating
// client: trigger.caller is the calling run and flow, as the API document
// says, and nothing more; the caller's step shows the child it waits for.
func TestCalledRunAsTheAPIShowsIt(t *testing.T) {
	srv, key := newTestServer(t)
	ctx := context.Background()
	child := createFlow(t, srv, key, `{"name":"child","engine":"FLOW_BUILDER"}`)
	call(t, srv, "POST", "/api/v1/flows/"+child.ID+"/enable", key, "").into(t, http.StatusOK, &flowView{})
	parent := createFlow(t, srv, key, `{"name":"parent","engine":"FLOW_BUILDER","steps":[{"name":"enrich","type":"CALL_FLOW","flowId":"`+child.ID+`"}]}`)
	p := projectOfKey(t, srv, key)
	full, err := srv.svc.Flow(ctx, p, parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	r, err := srv.svc.StartRun(ctx, full, automation.TriggerData{Method: "POST", Headers: map[string]string{}, Query: map[string]string{}, Body: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if at, _ := srv.svc.ExecuteRun(ctx, p.ID, r.ID); at.Outcome != automation.OutcomeRetry {
		t.Fatalf("caller's attempt = %v, want parked", at.Outcome)
	}
	childID := automation.CallRunID(r.ID, "enrich", child.ID)
	var got struct {
		Trigger struct {
			Method string
			Caller json.RawMessage
		}
	}
	call(t, srv, "GET", "/api/v1/flows/"+child.ID+"/runs/"+childID, key, "").into(t, http.StatusOK, &got)
	if want := fmt.Sprintf(`{"runId":%q,"flowId":%q}`, r.ID, parent.ID); string(got.Trigger.Caller) != want || got.Trigger.Method != "CALL_FLOW" {
		t.Errorf("child's trigger = %s %s, want method CALL_FLOW and caller %s", got.Trigger.Method, got.Trigger.Caller, want)
	}
	var list struct{ Data []json.RawMessage }
	call(t, srv, "GET", "/api/v1/flows/"+child.ID+"/runs", key, "").into(t, http.StatusOK, &list)
	if len(list.Data) != 1 || !strings.Contains(string(list.Data[0]), `"caller":{"runId":"`+r.ID+`","flowId":"`+parent.ID+`"}`) {
		t.Errorf("child in the run list = %s, want its caller without more", list.Data)
	}
	var waiting struct {
		Status string
		Steps  []struct{ Output json.RawMessage }
	}
	call(t, srv, "GET", "/api/v1/flows/"+parent.ID+"/runs/"+r.ID, key, "").into(t, http.StatusOK, &waiting)
	if want := `{"runId":"` + childID + `","waiting":true}`; waiting.Status != "RUNNING" || string(waiting.Steps[0].Output) != want {
		t.Errorf("caller = %+v, want RUNNING with output %s", waiting, want)
	}
}
