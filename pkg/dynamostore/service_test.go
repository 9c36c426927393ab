package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"flowservice/pkg/automation"
)

// memSecrets is the simplest Secrets, so that this test exercises only the
// store; smsecrets has its own tests on moto.
type memSecrets struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memSecrets) PutSecret(_ context.Context, project, name string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[project+"/"+name] = bytes.Clone(v)
	return nil
}

func (s *memSecrets) Secret(_ context.Context, project, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[project+"/"+name]
	if !ok {
		return nil, automation.NotFound("secret", name)
	}
	return v, nil
}

func (s *memSecrets) DeleteSecret(_ context.Context, project, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, project+"/"+name)
	return nil
}

// anyChecker accepts every expression, template and cron spec: the
// definitions here hold none that matter.
type anyChecker struct{}

func (anyChecker) Expression(string) error         { return nil }
func (anyChecker) Template(string) error           { return nil }
func (anyChecker) Cron(string, string) error       { return nil }
func (anyChecker) ResponseExpression(string) error { return nil }
func (anyChecker) TriggerKey(context.Context, string, automation.TriggerData) (string, error) {
	return "", nil
}

// TestService drives the domain Service on the DynamoDB store: what the API
// Lambda does, minus HTTP.
func TestService(t *testing.T) {
	store, _, _ := newStore(t)
	ctx := t.Context()
	svc, err := automation.NewService(automation.Config{
		Store: store, Secrets: &memSecrets{m: map[string][]byte{}}, Checker: anyChecker{},
		CursorKey: bytes.Repeat([]byte("k"), 32), EngineURL: "https://engine.test", WorkflowURL: "https://wf.test",
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.CreateProject(ctx, "acme", automation.PlanEnterprise)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := svc.CreateAPIKey(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := svc.Authenticate(ctx, key); err != nil || got.ID != p.ID {
		t.Fatalf("Authenticate = %+v, %v", got, err)
	}

	wf := automation.WorkflowBuilder
	create := func(name, method, path string) (automation.Flow, error) {
		return svc.CreateFlow(ctx, p, automation.FlowInput{
			Name: &name, Engine: &wf,
			Trigger: &automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{
				HTTPMethod: method, Path: path, ResponseMode: automation.RespondImmediately,
				Authentication: &automation.Authentication{Type: automation.AuthBasic, Username: "u", Password: "pw"},
			}},
		})
	}
	a, err := create("a", "ANY", "orders/new")
	if err != nil {
		t.Fatal(err)
	}
	_, err = create("b", "POST", "orders/new")
	var e *automation.Error
	if !errors.As(err, &e) || e.Code != "ROUTE_CONFLICT" {
		t.Fatalf("second flow on the path: %v, want ROUTE_CONFLICT", err)
	}
	// The receiver's lookup, with the secret revealed from Secrets.
	routes, err := store.RouteFlows(ctx, "orders/new")
	if err != nil || routes["POST"] != a.ID || len(routes) != len(automation.WebhookMethods) {
		t.Fatalf("RouteFlows = %v, %v", routes, err)
	}
	got, err := store.FlowByID(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if pw := got.Trigger.Webhook.Authentication.Password; pw != automation.SecretMask {
		t.Errorf("stored password = %q, want the mask", pw.Reveal())
	}
	revealed, err := svc.RevealFlow(ctx, got)
	if err != nil || revealed.Trigger.Webhook.Authentication.Password.Reveal() != "pw" {
		t.Errorf("RevealFlow = %v", err)
	}

	for i := range 7 {
		f, err := create("f"+strconv.Itoa(i), "GET", "p/"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := svc.EnableFlow(ctx, p, f.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	walk := func(status string) (n int) {
		pr := automation.PageRequest{Limit: "2", Status: status}
		for pages := 0; pages < 10; pages++ {
			l, err := svc.ListFlows(ctx, p, pr)
			if err != nil {
				t.Fatal(err)
			}
			n += len(l.Data)
			if !l.HasMore {
				return n
			}
			if len(l.Data) != 2 {
				t.Errorf("%s: a page before the last holds %d flows", status, len(l.Data))
			}
			pr.Cursor = *l.Cursor
		}
		t.Fatal("paging does not end")
		return 0
	}
	if n := walk(""); n != 8 {
		t.Errorf("walked %d flows, want 8", n)
	}
	if n := walk("ACTIVE"); n != 4 {
		t.Errorf("walked %d ACTIVE flows, want 4", n)
	}
	if n := walk("INACTIVE"); n != 4 {
		t.Errorf("walked %d INACTIVE flows, want 4", n)
	}

	// Moving a flow to the path frees the old one; deleting frees the new.
	newPath := automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{
		HTTPMethod: "PUT", Path: "orders/moved", ResponseMode: automation.RespondImmediately,
	}}
	if _, err := svc.UpdateFlow(ctx, p, a.ID, automation.FlowInput{Trigger: &newPath}); err != nil {
		t.Fatal(err)
	}
	if _, err := create("b", "POST", "orders/new"); err != nil {
		t.Errorf("old path still taken after the move: %v", err)
	}
	if err := svc.DeleteFlow(ctx, p, a.ID); err != nil {
		t.Fatal(err)
	}
	if routes, _ := store.RouteFlows(ctx, "orders/moved"); len(routes) != 0 {
		t.Errorf("routes left after delete: %v", routes)
	}
	if _, err := svc.Flow(ctx, p, a.ID); !automation.IsNotFound(err) {
		t.Errorf("deleted flow: %v", err)
	}
}
