package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
	"flowservice/pkg/awstest"
	"flowservice/pkg/dynamostore"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// newStore creates a fresh set of tables on the shared moto_server.
func newStore(t *testing.T) (*dynamostore.Store, *dynamodb.Client, dynamostore.Tables) {
	t.Helper()
	client := dynamodb.NewFromConfig(awstest.Start(t))
	tables := dynamostore.TableNames(awstest.UniqueName(t, "fs"))
	if err := dynamostore.CreateTables(t.Context(), client, tables); err != nil {
		t.Fatal(err)
	}
	return dynamostore.New(client, tables), client, tables
}

var base = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func newFlow(project, id string, n int) automation.Flow {
	return automation.Flow{
		ID: id, Project: project, Name: "flow " + id, Status: automation.FlowInactive,
		Engine: automation.FlowBuilder, TriggerType: automation.TriggerWebhook,
		Created: base.Add(time.Duration(n) * time.Second), Updated: base.Add(time.Duration(n) * time.Second),
		Version: 1, Steps: []automation.Step{},
		Trigger: automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{HTTPMethod: "POST"}},
	}
}

func workflow(project, id, method, path string) automation.Flow {
	f := newFlow(project, id, 0)
	f.Engine = automation.WorkflowBuilder
	f.Trigger.Webhook = &automation.Webhook{HTTPMethod: method, Path: path, ResponseMode: automation.RespondImmediately}
	return f
}

func wantCode(t *testing.T, err error, kind error, code string) {
	t.Helper()
	var e *automation.Error
	if !errors.As(err, &e) || !errors.Is(err, kind) || e.Code != code {
		t.Fatalf("err = %v, want %s (%v)", err, code, kind)
	}
}

func TestFlowRoundTrip(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := t.Context()
	f := newFlow("prj_a", "flw_1", 0)
	f.Engine = automation.WorkflowBuilder
	f.Description = "" // empty strings are valid attribute values
	f.Trigger = automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{
		HTTPMethod: "ANY", Path: "deploys/github", ResponseMode: automation.RespondOnCompletion,
		Authentication:    &automation.Authentication{Type: automation.AuthHeader, Name: "X-Webhook-Secret", Value: automation.SecretMask},
		Signature:         &automation.Signature{Header: "x-hub-signature-256", Prefix: "sha256=", Secret: automation.SecretMask},
		IdempotencyHeader: "X-GitHub-Delivery", AllowedOrigins: []string{"*"},
	}}
	f.Steps = []automation.Step{
		{Name: "check", Type: automation.StepFilter, Condition: "trigger.body.event == 'push'"},
		{Name: "notify", Type: automation.StepHTTP, ConnectionID: "con_1", Method: "POST", URL: "https://api.example.com/m",
			Headers: map[string]string{"X-A": "{{ trigger.body.a }}"}, Body: []byte(`{"text": "{{ trigger.body.data.ref }}", "n": [1, 2.5, null]}`),
			TimeoutMs: 5000, ContinueOnFail: true},
		{Name: "reply", Type: automation.StepRespond, StatusCode: 201, Body: []byte(`{"status":"ok"}`)},
		{Name: "code", Type: automation.StepCode, Code: "return 1", Signature: &automation.Signature{Preset: "GITHUB", Secret: "raw-kept"}},
		{Name: "set", Type: automation.StepSet, Values: []byte(`{}`), Query: automation.Query{Params: map[string]string{"q": "1"}}},
	}
	f.AllowedIPs = []string{"203.0.113.0/24", "2001:db8::1"}
	f.Stats = automation.FlowStats{} // never written by CreateFlow
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	got, err := s.Flow(ctx, "prj_a", "flw_1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Errorf("Flow round trip:\n got %+v\nwant %+v", got, f)
	}
	byID, err := s.FlowByID(ctx, "flw_1")
	if err != nil || !reflect.DeepEqual(byID, f) {
		t.Errorf("FlowByID = %+v, %v; want the flow", byID, err)
	}
}

func TestProjects(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := t.Context()
	ps := []automation.Project{
		{ID: "prj_b", Name: "beta", Plan: automation.PlanFree, Created: base},
		{ID: "prj_a", Name: "alpha", Plan: automation.PlanEnterprise, Created: base}, // same instant: ID breaks the tie
		{ID: "prj_0", Name: "zero", Plan: automation.PlanTeam, Created: base.Add(-time.Hour)},
	}
	for _, p := range ps {
		if err := s.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	err := s.CreateProject(ctx, automation.Project{ID: "prj_c", Name: "beta", Plan: automation.PlanFree, Created: base})
	wantCode(t, err, automation.ErrConflict, "PROJECT_EXISTS")
	if _, err := s.Project(ctx, "prj_c"); !automation.IsNotFound(err) {
		t.Errorf("a refused project was stored anyway: %v", err)
	}
	got, err := s.ProjectByName(ctx, "alpha")
	if err != nil || !reflect.DeepEqual(got, ps[1]) {
		t.Errorf("ProjectByName(alpha) = %+v, %v", got, err)
	}
	_, err = s.ProjectByName(ctx, "nope")
	wantCode(t, err, automation.ErrNotFound, "PROJECT_NOT_FOUND")
	_, err = s.Project(ctx, "prj_x")
	wantCode(t, err, automation.ErrNotFound, "PROJECT_NOT_FOUND")
	all, err := s.Projects(ctx)
	want := []automation.Project{ps[2], ps[1], ps[0]}
	if err != nil || !reflect.DeepEqual(all, want) {
		t.Errorf("Projects = %+v, %v; want %+v", all, err, want)
	}
}

func TestKeys(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := t.Context()
	k1 := automation.APIKey{ID: "key_1", Project: "prj_a", Hash: "h1", Prefix: "fsk_abcdef", Created: base, Role: automation.RoleAdmin}
	k2 := automation.APIKey{ID: "key_2", Project: "prj_b", Hash: "h2", Prefix: "fsk_ghijkl", Created: base.Add(time.Second), Role: automation.RoleAdmin}
	k3 := automation.APIKey{ID: "key_3", Project: "prj_a", Hash: "h3", Prefix: "fsk_mnopqr", Created: base.Add(2 * time.Second), Role: automation.RoleAdmin}
	for _, k := range []automation.APIKey{k1, k2, k3} {
		if err := s.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, s.CreateKey(ctx, k1), automation.ErrConflict, "KEY_EXISTS")
	got, err := s.KeyByHash(ctx, "h2")
	if err != nil || !reflect.DeepEqual(got, k2) {
		t.Errorf("KeyByHash(h2) = %+v, %v", got, err)
	}
	_, err = s.KeyByHash(ctx, "nope")
	wantCode(t, err, automation.ErrNotFound, "API_KEY_NOT_FOUND")

	ks, err := s.Keys(ctx, "prj_a")
	if err != nil || !reflect.DeepEqual(ks, []automation.APIKey{k1, k3}) {
		t.Errorf("Keys(prj_a) = %+v, %v", ks, err)
	}
	ks, err = s.Keys(ctx, "")
	if err != nil || !reflect.DeepEqual(ks, []automation.APIKey{k1, k2, k3}) {
		t.Errorf("Keys(all) = %+v, %v", ks, err)
	}

	at := base.Add(time.Hour)
	if err := s.RevokeKey(ctx, "key_1", at); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeKey(ctx, "key_1", at.Add(time.Hour)); err != nil {
		t.Fatalf("revoking twice: %v", err)
	}
	got, err = s.KeyByHash(ctx, "h1")
	if err != nil || got.Revoked == nil || !got.Revoked.Equal(at) {
		t.Errorf("revoked key = %+v, %v; want revoked at %v (the first revocation)", got, err, at)
	}
	wantCode(t, s.RevokeKey(ctx, "key_x", at), automation.ErrNotFound, "API_KEY_NOT_FOUND")
}

func TestRoutes(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := t.Context()
	a := workflow("prj_a", "flw_a", "ANY", "hooks/a")
	if err := s.CreateFlow(ctx, a); err != nil {
		t.Fatal(err)
	}
	routes, err := s.RouteFlows(ctx, "hooks/a")
	want := map[string]string{"GET": "flw_a", "POST": "flw_a", "PUT": "flw_a", "PATCH": "flw_a", "DELETE": "flw_a", "HEAD": "flw_a"}
	if err != nil || !reflect.DeepEqual(routes, want) {
		t.Fatalf("RouteFlows(hooks/a) = %v, %v; want %v", routes, err, want)
	}

	// Another project's flow cannot take the path either: paths are global.
	b := workflow("prj_b", "flw_b", "PUT", "hooks/a")
	err = s.CreateFlow(ctx, b)
	wantCode(t, err, automation.ErrConflict, "ROUTE_CONFLICT")
	if msg := err.Error(); !strings.Contains(msg, "PUT") || !strings.Contains(msg, `"hooks/a"`) {
		t.Errorf("conflict message %q does not name the method and path", msg)
	}
	if _, err := s.FlowByID(ctx, "flw_b"); !automation.IsNotFound(err) {
		t.Errorf("the clashing flow was stored anyway: %v", err)
	}

	// The same project's flows share a path, one method each.
	b = workflow("prj_a", "flw_b", "PUT", "hooks/b")
	if err := s.CreateFlow(ctx, b); err != nil {
		t.Fatal(err)
	}
	// Flow builder flows hold no routes.
	if err := s.CreateFlow(ctx, newFlow("prj_a", "flw_c", 1)); err != nil {
		t.Fatal(err)
	}

	// Move a from ANY hooks/a to GET hooks/b: b holds PUT there, so GET is free.
	a2 := a
	a2.Trigger.Webhook = &automation.Webhook{HTTPMethod: "GET", Path: "hooks/b"}
	a2.Version = 2
	if err := s.PutFlow(ctx, a2); err != nil {
		t.Fatal(err)
	}
	if routes, _ := s.RouteFlows(ctx, "hooks/a"); len(routes) != 0 {
		t.Errorf("old routes left behind: %v", routes)
	}
	routes, _ = s.RouteFlows(ctx, "hooks/b")
	if want := map[string]string{"GET": "flw_a", "PUT": "flw_b"}; !reflect.DeepEqual(routes, want) {
		t.Errorf("RouteFlows(hooks/b) = %v, want %v", routes, want)
	}

	// Taking b's PUT fails atomically: neither the flow nor its routes change.
	a3 := a2
	a3.Trigger.Webhook = &automation.Webhook{HTTPMethod: "ANY", Path: "hooks/b"}
	a3.Name = "renamed"
	a3.Version = 3
	err = s.PutFlow(ctx, a3)
	wantCode(t, err, automation.ErrConflict, "ROUTE_CONFLICT")
	if !strings.Contains(err.Error(), "PUT") {
		t.Errorf("conflict %q does not name PUT, the method held by the other flow", err)
	}
	if got, _ := s.Flow(ctx, "prj_a", "flw_a"); got.Name != a2.Name || got.Version != 2 {
		t.Errorf("refused PutFlow changed the flow: %+v", got)
	}
	routes, _ = s.RouteFlows(ctx, "hooks/b")
	if want := map[string]string{"GET": "flw_a", "PUT": "flw_b"}; !reflect.DeepEqual(routes, want) {
		t.Errorf("refused PutFlow changed routes: %v, want %v", routes, want)
	}

	// Stale version, missing flow, another project's flow.
	wantCode(t, s.PutFlow(ctx, a2), automation.ErrConflict, "FLOW_MODIFIED")
	gone := newFlow("prj_a", "flw_gone", 0)
	gone.Version = 2
	wantCode(t, s.PutFlow(ctx, gone), automation.ErrNotFound, "FLOW_NOT_FOUND")
	foreign := b
	foreign.Project = "prj_b"
	foreign.Version = 2
	wantCode(t, s.PutFlow(ctx, foreign), automation.ErrNotFound, "FLOW_NOT_FOUND")

	// Deleting frees the routes for others.
	wantCode(t, s.DeleteFlow(ctx, "prj_b", "flw_a"), automation.ErrNotFound, "FLOW_NOT_FOUND")
	if err := s.DeleteFlow(ctx, "prj_a", "flw_a"); err != nil {
		t.Fatal(err)
	}
	routes, _ = s.RouteFlows(ctx, "hooks/b")
	if want := map[string]string{"PUT": "flw_b"}; !reflect.DeepEqual(routes, want) {
		t.Errorf("after delete RouteFlows(hooks/b) = %v, want %v", routes, want)
	}
	wantCode(t, s.DeleteFlow(ctx, "prj_a", "flw_a"), automation.ErrNotFound, "FLOW_NOT_FOUND")
	if err := s.CreateFlow(ctx, workflow("prj_a", "flw_d", "GET", "hooks/b")); err != nil {
		t.Errorf("route freed by delete not reusable: %v", err)
	}
}

func TestPutFlowKeepsStats(t *testing.T) {
	s, client, tables := newStore(t)
	ctx := t.Context()
	f := newFlow("prj_a", "flw_1", 0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	// A run finishing, as the run store will record it.
	last := base.Add(time.Minute)
	_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &tables.Flows, Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "flw_1"}},
		UpdateExpression: aws.String("ADD finished :one, succeeded :one SET lastRun = :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": &types.AttributeValueMemberN{Value: "1"}, ":t": &types.AttributeValueMemberS{Value: last.Format(time.RFC3339Nano)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.Status, f.Version, f.Name = automation.FlowActive, 2, "renamed"
	f.Stats = automation.FlowStats{Finished: 99} // PutFlow must not write this
	if err := s.PutFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	got, err := s.Flow(ctx, "prj_a", "flw_1")
	if err != nil {
		t.Fatal(err)
	}
	want := automation.FlowStats{Finished: 1, Succeeded: 1, LastRun: &last}
	if !reflect.DeepEqual(got.Stats, want) || got.Name != "renamed" || got.Status != automation.FlowActive || got.Version != 2 {
		t.Errorf("after PutFlow: %+v stats %+v; want renamed, ACTIVE, v2, stats %+v", got, got.Stats, want)
	}
}

func TestListFlows(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := t.Context()
	var all []string
	for i := range 11 {
		f := newFlow("prj_a", fmt.Sprintf("flw_%02d", i), i)
		if i%3 == 0 {
			f.Status = automation.FlowActive
		}
		all = append(all, f.ID)
		if err := s.CreateFlow(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	// Same instant as flw_05: the ID orders them.
	tie := newFlow("prj_a", "flw_05b", 5)
	if err := s.CreateFlow(ctx, tie); err != nil {
		t.Fatal(err)
	}
	all = append(all[:6], append([]string{"flw_05b"}, all[6:]...)...)
	// Another project's flows never show.
	if err := s.CreateFlow(ctx, newFlow("prj_b", "flw_other", 3)); err != nil {
		t.Fatal(err)
	}
	// Flip one to ACTIVE later: the status index follows updates.
	f := newFlow("prj_a", "flw_01", 1)
	f.Status, f.Version = automation.FlowActive, 2
	if err := s.PutFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	active := []string{"flw_00", "flw_01", "flw_03", "flw_06", "flw_09"}

	tests := []struct {
		status string
		limit  int
		want   []string
	}{
		{"", 5, all}, {"", 1, all}, {"", 12, all}, {"", 100, all},
		{"ACTIVE", 2, active}, {"ACTIVE", 5, active}, {"INACTIVE", 3, nil},
	}
	inactive := []string{}
	for _, id := range all {
		if !contains(active, id) {
			inactive = append(inactive, id)
		}
	}
	tests[len(tests)-1].want = inactive
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.status, tt.limit), func(t *testing.T) {
			var got []string
			q := automation.ListQuery{Limit: tt.limit, Status: tt.status}
			for pages := 0; ; pages++ {
				if pages > 20 {
					t.Fatal("paging does not end")
				}
				p, err := s.ListFlows(ctx, "prj_a", q)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range p.Items {
					got = append(got, f.ID)
					if tt.status != "" && string(f.Status) != tt.status {
						t.Errorf("status filter %s returned %s (%s)", tt.status, f.ID, f.Status)
					}
				}
				if p.Next == "" {
					break
				}
				if len(p.Items) != tt.limit {
					t.Errorf("page of %d items before the last, want %d", len(p.Items), tt.limit)
				}
				q.After = p.Next
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("walked %v\nwant   %v", got, tt.want)
			}
		})
	}
	p, err := s.ListFlows(ctx, "prj_none", automation.ListQuery{Limit: 10})
	if err != nil || len(p.Items) != 0 || p.Next != "" {
		t.Errorf("empty project: %+v, %v", p, err)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestDeleteFlowDeletesRuns(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := t.Context()
	for _, id := range []string{"flw_1", "flw_2"} {
		if err := s.CreateFlow(ctx, newFlow("prj_a", id, 0)); err != nil {
			t.Fatal(err)
		}
		for i := range 30 { // more than one BatchWriteItem
			r := automation.Run{ID: fmt.Sprintf("run_%s_%02d", id, i), Project: "prj_a", FlowID: id,
				Status: automation.RunRunning, Created: base.Add(time.Duration(i) * time.Second)}
			if err := s.CreateRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.DeleteFlow(ctx, "prj_a", "flw_1"); err != nil {
		t.Fatal(err)
	}
	count := func(id string) int {
		p, err := s.ListRuns(ctx, "prj_a", id, automation.ListQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Items)
	}
	if n1, n2 := count("flw_1"), count("flw_2"); n1 != 0 || n2 != 30 {
		t.Errorf("runs after deleting flw_1: %d of flw_1, %d of flw_2; want 0 and 30", n1, n2)
	}
	if _, err := s.Run(ctx, "prj_a", "flw_1", "run_flw_1_07"); !automation.IsNotFound(err) {
		t.Errorf("run of the deleted flow: %v", err)
	}
}

func TestConnections(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := t.Context()
	for i := range 5 {
		c := automation.Connection{
			ID: fmt.Sprintf("con_%d", i), Project: "prj_a", Name: "c", App: "slack", Type: automation.ConnectionAPIKey,
			Status: automation.ConnectionActive, Created: base.Add(time.Duration(i) * time.Second), Updated: base,
		}
		if err := s.CreateConnection(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, s.CreateConnection(ctx, automation.Connection{ID: "con_0", Project: "prj_a", Created: base}), automation.ErrConflict, "CONNECTION_EXISTS")
	c, err := s.Connection(ctx, "prj_a", "con_2")
	if err != nil || c.App != "slack" || !c.Created.Equal(base.Add(2*time.Second)) {
		t.Errorf("Connection = %+v, %v", c, err)
	}
	_, err = s.Connection(ctx, "prj_b", "con_2")
	wantCode(t, err, automation.ErrNotFound, "CONNECTION_NOT_FOUND")
	wantCode(t, s.DeleteConnection(ctx, "prj_b", "con_2"), automation.ErrNotFound, "CONNECTION_NOT_FOUND")
	wantCode(t, s.SetConnectionStatus(ctx, "prj_b", "con_2", automation.ConnectionError, base), automation.ErrNotFound, "CONNECTION_NOT_FOUND")
	wantCode(t, s.SetConnectionStatus(ctx, "prj_a", "con_x", automation.ConnectionError, base), automation.ErrNotFound, "CONNECTION_NOT_FOUND")

	at := base.Add(time.Hour)
	if err := s.SetConnectionStatus(ctx, "prj_a", "con_2", automation.ConnectionRevoked, at); err != nil {
		t.Fatal(err)
	}
	c, _ = s.Connection(ctx, "prj_a", "con_2")
	if c.Status != automation.ConnectionRevoked || !c.Updated.Equal(at) {
		t.Errorf("after SetConnectionStatus: %+v", c)
	}
	if err := s.DeleteConnection(ctx, "prj_a", "con_3"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteConnection(ctx, "prj_a", "con_3"), automation.ErrNotFound, "CONNECTION_NOT_FOUND")

	var got []string
	q := automation.ListQuery{Limit: 2}
	for {
		p, err := s.ListConnections(ctx, "prj_a", q)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Items {
			got = append(got, c.ID)
		}
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	if want := []string{"con_0", "con_1", "con_2", "con_4"}; !reflect.DeepEqual(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
}

func TestCreateTablesTwice(t *testing.T) {
	_, client, tables := newStore(t)
	if err := dynamostore.CreateTables(t.Context(), client, tables); err != nil {
		t.Errorf("CreateTables on existing tables: %v", err)
	}
	ttl, err := client.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: &tables.Runs})
	if err != nil || ttl.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled ||
		aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "expiresAt" {
		t.Errorf("runs TTL = %+v, %v; want enabled on expiresAt", ttl, err)
	}
}

// racing runs before each transaction, as another writer between the
// Store's read and its write would.
type racing struct {
	dynamostore.API
	before func()
}

func (r *racing) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if r.before != nil {
		before := r.before
		r.before = nil
		before()
	}
	return r.API.TransactWriteItems(ctx, in, opts...)
}

// TestPutFlowRaces checks the conditions inside the transaction, which the
// read before it cannot: a write or delete between the two.
func TestPutFlowRaces(t *testing.T) {
	s, client, tables := newStore(t)
	ctx := t.Context()
	f := workflow("prj_a", "flw_1", "POST", "race")
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	r := &racing{API: client}
	racy := dynamostore.New(r, tables)

	other := f
	other.Version, other.Name = 2, "other writer"
	r.before = func() {
		if err := s.PutFlow(ctx, other); err != nil {
			t.Errorf("concurrent PutFlow: %v", err)
		}
	}
	mine := f
	mine.Version = 2
	mine.Trigger.Webhook = &automation.Webhook{HTTPMethod: "GET", Path: "race2"}
	wantCode(t, racy.PutFlow(ctx, mine), automation.ErrConflict, "FLOW_MODIFIED")
	if got, _ := s.Flow(ctx, "prj_a", "flw_1"); got.Name != "other writer" {
		t.Errorf("flow = %+v, want the other writer's", got)
	}
	if routes, _ := s.RouteFlows(ctx, "race2"); len(routes) != 0 {
		t.Errorf("the refused write moved routes: %v", routes)
	}

	r.before = func() {
		if err := s.DeleteFlow(ctx, "prj_a", "flw_1"); err != nil {
			t.Errorf("concurrent DeleteFlow: %v", err)
		}
	}
	mine.Version = 3
	wantCode(t, racy.PutFlow(ctx, mine), automation.ErrNotFound, "FLOW_NOT_FOUND")
	if routes, _ := s.RouteFlows(ctx, "race2"); len(routes) != 0 {
		t.Errorf("write to a deleted flow left routes: %v", routes)
	}

	// DeleteFlow retries when the flow moves its routes under it, so none
	// is left behind.
	g := workflow("prj_a", "flw_2", "POST", "del1")
	if err := s.CreateFlow(ctx, g); err != nil {
		t.Fatal(err)
	}
	moved := g
	moved.Version = 2
	moved.Trigger.Webhook = &automation.Webhook{HTTPMethod: "PUT", Path: "del2"}
	r.before = func() {
		if err := s.PutFlow(ctx, moved); err != nil {
			t.Errorf("concurrent PutFlow: %v", err)
		}
	}
	if err := racy.DeleteFlow(ctx, "prj_a", "flw_2"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"del1", "del2"} {
		if routes, _ := s.RouteFlows(ctx, p); len(routes) != 0 {
			t.Errorf("routes of %s left after delete: %v", p, routes)
		}
	}
}

func TestRunExpiresAt(t *testing.T) {
	_, client, tables := newStore(t)
	s := dynamostore.New(client, tables, dynamostore.WithRunRetention(48*time.Hour))
	ctx := t.Context()
	f := newFlow("prj_a", "flw_1", 0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	r := automation.Run{ID: "run_1", Project: "prj_a", FlowID: "flw_1", Status: automation.RunRunning, Created: base}
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Runs,
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "run_1"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(base.Add(48 * time.Hour).Unix())
	if n, ok := out.Item["expiresAt"].(*types.AttributeValueMemberN); !ok || n.Value != want {
		t.Errorf("expiresAt = %v, want N %s (created + retention, epoch seconds)", out.Item["expiresAt"], want)
	}
	// A run of a flow that is gone, or of another project's flow, is refused.
	gone := r
	gone.ID, gone.FlowID = "run_2", "flw_gone"
	wantCode(t, s.CreateRun(ctx, gone), automation.ErrNotFound, "FLOW_NOT_FOUND")
	foreign := r
	foreign.ID, foreign.Project = "run_3", "prj_b"
	wantCode(t, s.CreateRun(ctx, foreign), automation.ErrNotFound, "FLOW_NOT_FOUND")
}

// TestRunDue: what an early delivery of a parked run's message reads. A
// parked run is due at its waitpoint's expiry, and at the decision's time
// once a decision made it due (in the waitpoint's own transaction); a
// final run says so; another project's or a missing run is not found. The
// read is one GetItem of three attributes, eventually consistent: 0.5
// read units while the run item is under 4 KB, as this one is.
func TestRunDue(t *testing.T) {
	s, client, tables := newStore(t)
	ctx := t.Context()
	if err := s.CreateFlow(ctx, newFlow("prj_a", "flw_1", 0)); err != nil {
		t.Fatal(err)
	}
	r := automation.Run{ID: "run_1", Project: "prj_a", FlowID: "flw_1", Status: automation.RunRunning, Created: base}
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.ClaimRun(ctx, "prj_a", "run_1", base, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	expiry := base.Add(72 * time.Hour)
	claimed.NextAttemptAt, claimed.WaitingFor = &expiry, automation.WaitingApproval
	if err := s.ReleaseRun(ctx, claimed); err != nil {
		t.Fatal(err)
	}
	if st, next, err := s.RunDue(ctx, "prj_a", "run_1"); err != nil || st != automation.RunRunning || next == nil || !next.Equal(expiry) {
		t.Fatalf("parked run: %q, %v, %v; want RUNNING due at %v", st, next, err, expiry)
	}
	_, hash := automation.NewWaitpointToken()
	if _, err := s.UpdateWaitpoint(ctx, "prj_a", "run_1", "ok", func(w *automation.Waitpoint, found bool) (bool, error) {
		*w = automation.Waitpoint{Kind: automation.WaitApproval, Status: automation.WaitpointPending, Created: base,
			ExpiresAt: expiry, TokenHash: hash}
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	decided := base.Add(time.Hour)
	if _, err := s.UpdateWaitpoint(ctx, "prj_a", "run_1", "ok", func(w *automation.Waitpoint, found bool) (bool, error) {
		w.Status, w.TokenHash = automation.WaitpointDecided, ""
		w.Decisions = append(w.Decisions, automation.Decision{Decision: "approved", At: decided})
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if st, next, err := s.RunDue(ctx, "prj_a", "run_1"); err != nil || st != automation.RunRunning || next == nil || !next.Equal(decided) {
		t.Fatalf("after the decision: %q, %v, %v; want RUNNING due at %v", st, next, err, decided)
	}
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Runs,
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "run_1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := dynamostore.ItemSize(out.Item); n >= 4096 {
		t.Errorf("the parked run item is %d bytes: a read of it is more than 0.5 units", n)
	}
	claimed, err = s.ClaimRun(ctx, "prj_a", "run_1", decided, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	claimed.Status, claimed.NextAttemptAt, claimed.WaitingFor = automation.RunFailed, nil, ""
	if err := s.FinishRun(ctx, claimed); err != nil {
		t.Fatal(err)
	}
	if st, _, err := s.RunDue(ctx, "prj_a", "run_1"); err != nil || !st.Final() {
		t.Fatalf("finished run: %q, %v; want a final status", st, err)
	}
	for _, k := range [][2]string{{"prj_b", "run_1"}, {"prj_a", "run_2"}} {
		if _, _, err := s.RunDue(ctx, k[0], k[1]); !automation.IsNotFound(err) {
			t.Errorf("RunDue(%v) = %v, want not found", k, err)
		}
	}
}

func TestRunStatus(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := t.Context()
	if err := s.CreateFlow(ctx, newFlow("prj_a", "flw_1", 0)); err != nil {
		t.Fatal(err)
	}
	r := automation.Run{ID: "run_1", Project: "prj_a", FlowID: "flw_1", Status: automation.RunRunning, Created: base}
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if st, err := s.RunStatus(ctx, "prj_a", "flw_1", "run_1"); err != nil || st != automation.RunRunning {
		t.Fatalf("status of a new run = %q, %v; want RUNNING", st, err)
	}
	claimed, err := s.ClaimRun(ctx, "prj_a", "run_1", base, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	claimed.Status = automation.RunSucceeded
	if err := s.FinishRun(ctx, claimed); err != nil {
		t.Fatal(err)
	}
	if st, err := s.RunStatus(ctx, "prj_a", "flw_1", "run_1"); err != nil || st != automation.RunSucceeded {
		t.Fatalf("status of the finished run = %q, %v; want SUCCEEDED", st, err)
	}
	// Another project's, another flow's or a missing run is not found.
	for _, k := range [][3]string{{"prj_b", "flw_1", "run_1"}, {"prj_a", "flw_2", "run_1"}, {"prj_a", "flw_1", "run_2"}} {
		if _, err := s.RunStatus(ctx, k[0], k[1], k[2]); !automation.IsNotFound(err) {
			t.Errorf("RunStatus(%v) = %v, want not found", k, err)
		}
	}
}
