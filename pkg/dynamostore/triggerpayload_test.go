package dynamostore_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// TestBinaryTriggerPayload: a large binary body (bodyBase64) and multipart
// files go to the payload store with the rest of the trigger and come back
// whole; the item keeps none of them.
func TestBinaryTriggerPayload(t *testing.T) {
	s, p, _, _ := payloadStore(t)
	ctx := t.Context()
	f := newFlow("prj_b", "flw_bin", 0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	r := bigRun(f, "run_bin", 10)
	r.Trigger.Body, r.Trigger.RawBody = json.RawMessage(`null`), ""
	r.Trigger.BodyBase64 = strings.Repeat("AAEC", 2000)
	r.Trigger.Files = []automation.TriggerFile{{Field: "f", Filename: "a.bin", ContentType: "application/octet-stream", Size: 3, Base64: "AAEC"}}
	r.Trigger.Params = map[string]string{"id": "42"}
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if ks := p.keys(r.ID); len(ks) != 1 {
		t.Fatalf("payload keys = %v, want the trigger", ks)
	}
	got, err := s.Run(ctx, f.Project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Trigger.BodyBase64 != r.Trigger.BodyBase64 || !reflect.DeepEqual(got.Trigger.Files, r.Trigger.Files) ||
		got.Trigger.Params["id"] != "42" {
		t.Errorf("trigger read back: %d base64 chars, files %+v, params %v", len(got.Trigger.BodyBase64), got.Trigger.Files, got.Trigger.Params)
	}
}
