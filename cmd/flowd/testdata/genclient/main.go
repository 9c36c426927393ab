// Command genclient is a round trip through flowd with the Go client
// oapi-codegen generates from pkg/httpapi/openapi.json: TestGeneratedGoClient
// generates client.gen.go beside this file, builds both and runs the result
// against a started flowd. It lives in testdata so that `go build ./...`
// never sees it without the generated half.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: genclient BASE_URL API_KEY")
		os.Exit(2)
	}
	if err := roundTrip(context.Background(), os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "genclient:", err)
		os.Exit(1)
	}
	fmt.Println("round trip ok")
}

// roundTrip makes a connection and a flow, enables the flow, sends it a
// webhook, reads the finished run, lists and deletes, each through the
// generated client's typed requests and responses.
func roundTrip(ctx context.Context, base, key string) error {
	c, err := NewClientWithResponses(base, WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+key)
		return nil
	}))
	if err != nil {
		return err
	}

	apiKey := "sk-generated-client"
	var value ConnectionCreate_Value // one of the connection types' values
	if err := value.FromConnectionValue(ConnectionValue{ApiKey: &apiKey}); err != nil {
		return fmt.Errorf("connection value: %w", err)
	}
	conn, err := c.CreateConnectionWithResponse(ctx, CreateConnectionJSONRequestBody{
		Name: "Chat", App: "chat", Type: ConnectionCreateType("API_KEY"), Value: value})
	if err != nil {
		return fmt.Errorf("create connection: %w", err)
	}
	if conn.JSON201 == nil || string(conn.JSON201.Status) != "ACTIVE" {
		return fmt.Errorf("create connection: %d %s", conn.StatusCode(), conn.Body)
	}

	cond := `trigger.body.event == "signup"`
	steps := []Step{
		{Name: "signups", Type: StepType("FILTER"), Condition: &cond},
		{Name: "lead", Type: StepType("SET"), Values: &map[string]interface{}{"email": "{{ trigger.body.email }}"}},
	}
	created, err := c.CreateFlowWithResponse(ctx, CreateFlowJSONRequestBody{Name: "Generated client", Engine: Engine("FLOW_BUILDER"), Steps: &steps})
	if err != nil {
		return fmt.Errorf("create flow: %w", err)
	}
	if created.JSON201 == nil || string(created.JSON201.Status) != "INACTIVE" {
		return fmt.Errorf("create flow: %d %s", created.StatusCode(), created.Body)
	}
	flowID := created.JSON201.Id

	enabled, err := c.EnableFlowWithResponse(ctx, flowID)
	if err != nil {
		return fmt.Errorf("enable flow: %w", err)
	}
	if enabled.JSON200 == nil || string(enabled.JSON200.Status) != "ACTIVE" {
		return fmt.Errorf("enable flow: %d %s", enabled.StatusCode(), enabled.Body)
	}

	started, err := c.ReceiveFlowWebhookWithResponse(ctx, flowID, map[string]interface{}{"event": "signup", "email": "ada@example.com"})
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	if started.JSON200 == nil || started.JSON200.RunId == "" {
		return fmt.Errorf("webhook: %d %s", started.StatusCode(), started.Body)
	}

	// The run executes in the background: read it until it is final.
	var run *Run
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := c.GetRunWithResponse(ctx, flowID, started.JSON200.RunId, nil)
		if err != nil {
			return fmt.Errorf("get run: %w", err)
		}
		if got.JSON200 == nil {
			return fmt.Errorf("get run: %d %s", got.StatusCode(), got.Body)
		}
		if run = got.JSON200; string(run.Status) != "RUNNING" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("run %s still RUNNING after 15s", run.Id)
		}
	}
	if string(run.Status) != "SUCCEEDED" || len(run.Steps) != 2 {
		return fmt.Errorf("run: status %s with %d steps, want SUCCEEDED with 2", run.Status, len(run.Steps))
	}
	if want := map[string]interface{}{"email": "ada@example.com"}; !reflect.DeepEqual(run.Steps[1].Output, want) {
		return fmt.Errorf("run: step lead output %#v, want %#v", run.Steps[1].Output, want)
	}

	list, err := c.ListFlowsWithResponse(ctx, &ListFlowsParams{})
	if err != nil {
		return fmt.Errorf("list flows: %w", err)
	}
	if list.JSON200 == nil || len(list.JSON200.Data) != 1 || list.JSON200.Data[0].Id != flowID {
		return fmt.Errorf("list flows: %d %s", list.StatusCode(), list.Body)
	}

	if del, err := c.DeleteFlowWithResponse(ctx, flowID); err != nil || del.StatusCode() != http.StatusNoContent {
		return fmt.Errorf("delete flow: %v %v", err, del)
	}
	if del, err := c.DeleteConnectionWithResponse(ctx, conn.JSON201.Id); err != nil || del.StatusCode() != http.StatusNoContent {
		return fmt.Errorf("delete connection: %v %v", err, del)
	}
	return nil
}
