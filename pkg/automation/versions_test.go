package automation_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

func setStep(name string) automation.Step {
	return automation.Step{Name: name, Type: automation.StepSet, Values: []byte(`{"v": "` + name + `"}`)}
}

func stepNames(steps []automation.Step) string {
	out := ""
	for _, s := range steps {
		out += s.Name + " "
	}
	return out
}

func wantCode(t *testing.T, what string, err, kind error, code string) {
	t.Helper()
	var e *automation.Error
	if !errors.Is(err, kind) || !errors.As(err, &e) || e.Code != code {
		t.Fatalf("%s: err = %v, want %v with code %s", what, err, kind, code)
	}
}

// TestVersionRules: version 1 on create; metadata edits make no version;
// definition edits through UpdateFlow (PUT /api/v1/flows/{flowId}) publish one; a draft changes nothing
// that runs until published, is DRAFT_OUTDATED after another publish unless
// forced; restore publishes a copy; createdBy names the publisher.
func TestVersionRules(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := automation.WithPublisher(context.Background(), "key_test")
	svc, p := e.svc, e.project
	name, engine := "versioned", automation.FlowBuilder
	one := []automation.Step{setStep("one")}
	f, err := svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &engine, Steps: &one})
	if err != nil || f.LiveVersion != 1 || f.HasDraft {
		t.Fatalf("create = version %d hasDraft %v, %v; want 1 false", f.LiveVersion, f.HasDraft, err)
	}
	renamed, desc := "renamed", "metadata only"
	if f, err = svc.UpdateFlow(ctx, p, f.ID, automation.FlowInput{Name: &renamed, Description: &desc}); err != nil || f.LiveVersion != 1 {
		t.Fatalf("metadata update = version %d, %v; want 1", f.LiveVersion, err)
	}
	two := []automation.Step{setStep("two")}
	if f, err = svc.UpdateFlow(ctx, p, f.ID, automation.FlowInput{Steps: &two}); err != nil || f.LiveVersion != 2 {
		t.Fatalf("steps update = version %d, %v; want 2", f.LiveVersion, err)
	}
	v1, err := svc.FlowVersion(ctx, p, f.ID, 1)
	if err != nil || stepNames(v1.Definition.Steps) != "one " || v1.CreatedBy != "key_test" {
		t.Fatalf("version 1 = %+v, %v", v1, err)
	}

	// A draft changes nothing that runs.
	three := []automation.Step{setStep("three")}
	d, err := svc.SaveDraft(ctx, p, f.ID, automation.DraftInput{Steps: &three})
	if err != nil || d.BasedOn != 2 || stepNames(d.Steps) != "three " {
		t.Fatalf("save draft = %+v, %v", d, err)
	}
	if f, err = svc.Flow(ctx, p, f.ID); err != nil || !f.HasDraft || f.LiveVersion != 2 || stepNames(f.Steps) != "two " {
		t.Fatalf("flow with a draft = version %d hasDraft %v steps %s, %v", f.LiveVersion, f.HasDraft, stepNames(f.Steps), err)
	}
	bad := []automation.Step{{Name: "x", Type: "ZAPIER"}}
	if _, err := svc.SaveDraft(ctx, p, f.ID, automation.DraftInput{Steps: &bad}); !errors.Is(err, automation.ErrInvalid) {
		t.Fatalf("an invalid draft: err = %v, want a 400", err)
	}

	// UpdateFlow publishes at once; the draft stays, now outdated.
	four := []automation.Step{setStep("four")}
	if f, err = svc.UpdateFlow(ctx, p, f.ID, automation.FlowInput{Steps: &four}); err != nil || f.LiveVersion != 3 || !f.HasDraft {
		t.Fatalf("steps update with a draft = version %d hasDraft %v, %v; want 3 true", f.LiveVersion, f.HasDraft, err)
	}
	_, err = svc.Publish(ctx, p, f.ID, automation.PublishRequest{Message: "mine"})
	wantCode(t, "publish an outdated draft", err, automation.ErrConflict, "DRAFT_OUTDATED")
	pub := automation.WithPublisher(ctx, automation.PublisherDashboard)
	if f, err = svc.Publish(pub, p, f.ID, automation.PublishRequest{Message: "mine", Force: true}); err != nil ||
		f.LiveVersion != 4 || f.HasDraft || stepNames(f.Steps) != "three " {
		t.Fatalf("forced publish = version %d hasDraft %v steps %s, %v", f.LiveVersion, f.HasDraft, stepNames(f.Steps), err)
	}
	_, err = svc.Publish(ctx, p, f.ID, automation.PublishRequest{})
	wantCode(t, "publish without a draft", err, automation.ErrConflict, "DRAFT_NOT_FOUND")
	_, err = svc.Draft(ctx, p, f.ID)
	wantCode(t, "get a published draft", err, automation.ErrNotFound, "DRAFT_NOT_FOUND")
	wantCode(t, "discard without a draft", svc.DiscardDraft(ctx, p, f.ID), automation.ErrNotFound, "DRAFT_NOT_FOUND")

	// Restore publishes a copy.
	if f, err = svc.RestoreVersion(ctx, p, f.ID, 1); err != nil || f.LiveVersion != 5 || stepNames(f.Steps) != "one " {
		t.Fatalf("restore 1 = version %d steps %s, %v", f.LiveVersion, stepNames(f.Steps), err)
	}
	_, err = svc.RestoreVersion(ctx, p, f.ID, 99)
	wantCode(t, "restore a missing version", err, automation.ErrNotFound, "VERSION_NOT_FOUND")

	list, err := svc.ListFlowVersions(ctx, p, f.ID, automation.PageRequest{Limit: "2"})
	if err != nil || len(list.Data) != 2 || !list.HasMore || list.Data[0].Version != 5 || list.Data[0].Message != "restored from version 1" ||
		list.Data[1].Message != "mine" || list.Data[1].CreatedBy != automation.PublisherDashboard || list.Data[0].Definition != nil {
		t.Fatalf("versions page = %+v, %v", list, err)
	}
	rest, err := svc.ListFlowVersions(ctx, p, f.ID, automation.PageRequest{Limit: "10", Cursor: *list.Cursor})
	if err != nil || len(rest.Data) != 3 || rest.Data[2].Version != 1 || rest.HasMore {
		t.Fatalf("second versions page = %+v, %v", rest, err)
	}
	other, _ := e.Project(t, "other", automation.PlanTeam)
	_, err = svc.ListFlowVersions(ctx, other, f.ID, automation.PageRequest{})
	wantCode(t, "another project's versions", err, automation.ErrNotFound, "FLOW_NOT_FOUND")
}

// TestDraftSecretsStayApart: a secret a draft sets is not what the live
// definition reads until the draft is published, and discarding the draft
// drops it; a version restored after its secret field went away still has
// its value.
func TestDraftSecretsStayApart(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	svc, p := e.svc, e.project
	name, engine := "signed", automation.FlowBuilder
	verify := func(secret string) *[]automation.Step {
		return &[]automation.Step{{Name: "verify", Type: automation.StepVerifySignature,
			Signature: &automation.Signature{Preset: automation.PresetGitHub, Secret: automation.Secret(secret)}}}
	}
	f, err := svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &engine, Steps: verify("live-secret")})
	if err != nil {
		t.Fatal(err)
	}
	secretOf := func() string {
		t.Helper()
		g, err := svc.Flow(ctx, p, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		g, err = svc.RevealFlow(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Steps) == 0 || g.Steps[0].Signature == nil {
			return ""
		}
		return g.Steps[0].Signature.Secret.Reveal()
	}
	if _, err := svc.SaveDraft(ctx, p, f.ID, automation.DraftInput{Steps: verify("draft-secret")}); err != nil {
		t.Fatal(err)
	}
	if got := secretOf(); got != "live-secret" {
		t.Fatalf("live secret with a draft = %q", got)
	}
	if err := svc.DiscardDraft(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SaveDraft(ctx, p, f.ID, automation.DraftInput{Steps: verify("draft-secret-2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Publish(ctx, p, f.ID, automation.PublishRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := secretOf(); got != "draft-secret-2" {
		t.Fatalf("secret after publishing the draft = %q", got)
	}
	// Version 3 has no secret; restoring version 2 finds its value.
	none := []automation.Step{setStep("plain")}
	if _, err := svc.UpdateFlow(ctx, p, f.ID, automation.FlowInput{Steps: &none}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RestoreVersion(ctx, p, f.ID, 2); err != nil {
		t.Fatalf("restore a version whose secret field went away: %v", err)
	}
	if got := secretOf(); got != "draft-secret-2" {
		t.Fatalf("secret after the restore = %q", got)
	}
}

// countingVersions counts the version reads the Service makes.
type countingVersions struct {
	automation.Store
	reads *atomic.Int64
}

func (c countingVersions) FlowVersion(ctx context.Context, project, flowID string, n int64) (automation.FlowVersion, error) {
	c.reads.Add(1)
	return c.Store.FlowVersion(ctx, project, flowID, n)
}

// TestPinnedVersionReadOnce: runs on the live version read no version;
// the first attempt pinned to an older version reads it once, and later
// attempts on it read it from memory.
func TestPinnedVersionReadOnce(t *testing.T) {
	var reads atomic.Int64
	fe := flowtest.New(t, flowtest.Options{Store: func(s automation.Store) automation.Store {
		return countingVersions{Store: s, reads: &reads}
	}})
	p, _ := fe.Project(t, "pinned", automation.PlanTeam)
	ctx := context.Background()
	pay := newRecorder(t, status(201))
	notify := newRecorder(t, status(400), status(200))
	f := fe.ActiveFlow(t, p, "pinned",
		automation.Step{Name: "pay", Type: automation.StepHTTP, Method: "POST", URL: pay.URL},
		automation.Step{Name: "notify", Type: automation.StepHTTP, Method: "POST", URL: notify.URL})
	old := fe.StartRef(t, f)
	if at, err := fe.Svc.ExecuteRun(ctx, p.ID, old.ID); err != nil || at.Run.Status != automation.RunFailed {
		t.Fatalf("first run = %s, %v; want FAILED", at.Run.Status, err)
	}
	if n := reads.Load(); n != 0 {
		t.Fatalf("a run on the live version read %d versions", n)
	}
	elsewhere := newRecorder(t, status(200))
	moved := []automation.Step{{Name: "notify", Type: automation.StepHTTP, Method: "POST", URL: elsewhere.URL}}
	if _, err := fe.Svc.UpdateFlow(ctx, p, f.ID, automation.FlowInput{Steps: &moved}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		r, err := fe.Svc.RetryRun(ctx, p, f.ID, old.ID, automation.RetryRequest{From: automation.RetryFromFailedStep})
		if err != nil || r.FlowVersion == nil || *r.FlowVersion != 1 {
			t.Fatalf("retry %d = %+v, %v; want pinned to version 1", i, r.FlowVersion, err)
		}
		if at, err := fe.Svc.ExecuteRun(ctx, p.ID, r.ID); err != nil || at.Run.Status != automation.RunSucceeded {
			t.Fatalf("retry %d = %s, %v", i, at.Run.Status, err)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("two attempts pinned to version 1 read it %d times, want once", n)
	}
	if len(elsewhere.seen()) != 0 || len(notify.seen()) != 3 {
		t.Fatalf("calls: version 2's notify %d, version 1's %d; want 0 and 3", len(elsewhere.seen()), len(notify.seen()))
	}
}

// TestTestRunsRunTheDraft: the event an armed Test Trigger takes runs the
// flow's draft as it was when the run started (a later save changes
// nothing), shown as "draft": true with a null flowVersion; the next
// delivery runs the live version.
func TestTestRunsRunTheDraft(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	svc, p := e.svc, e.project
	live, first, second := newRecorder(t, status(200)), newRecorder(t, status(200)), newRecorder(t, status(200))
	call := func(url string) *[]automation.Step {
		return &[]automation.Step{{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: url}}
	}
	f := e.flowCalling(t, live.URL)
	if _, err := svc.SaveDraft(ctx, p, f.ID, automation.DraftInput{Steps: call(first.URL)}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ArmWebhookTest(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	g, err := svc.WebhookFlow(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	td := automation.TriggerData{Method: "POST", Body: []byte(`{}`)}
	test, err := svc.ReceiveWebhook(ctx, g, td)
	if err != nil {
		t.Fatal(err)
	}
	// Saved again before the test run executes: the run keeps the first.
	if _, err := svc.SaveDraft(ctx, p, f.ID, automation.DraftInput{Steps: call(second.URL)}); err != nil {
		t.Fatal(err)
	}
	if at, err := svc.ExecuteRun(ctx, p.ID, test.ID); err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("test run = %s, %v", at.Run.Status, err)
	}
	if len(first.seen()) != 1 || len(second.seen()) != 0 || len(live.seen()) != 0 {
		t.Fatalf("test run calls: draft as started %d, draft saved later %d, live %d; want 1 0 0",
			len(first.seen()), len(second.seen()), len(live.seen()))
	}
	shown, err := svc.Run(ctx, p, f.ID, test.ID)
	if err != nil || !shown.Draft || shown.FlowVersion != nil || shown.DraftDefinition != nil {
		t.Fatalf("test run shown as draft %v, flowVersion %v, definition %v, %v; want true, null, hidden",
			shown.Draft, shown.FlowVersion, shown.DraftDefinition != nil, err)
	}

	next, err := svc.ReceiveWebhook(ctx, g, td)
	if err != nil {
		t.Fatal(err)
	}
	if at, err := svc.ExecuteRun(ctx, p.ID, next.ID); err != nil || at.Run.Status != automation.RunSucceeded || at.Run.Draft {
		t.Fatalf("next delivery = %s draft %v, %v", at.Run.Status, at.Run.Draft, err)
	}
	if len(live.seen()) != 1 || len(second.seen()) != 0 {
		t.Fatalf("a delivery without an armed Test Trigger called live %d, draft %d; want 1 0", len(live.seen()), len(second.seen()))
	}
}

// TestFlowFromBeforeVersions: a flow stored with no live version (a
// DynamoDB flow written before versions) shows version 1, lists it, and
// its first publish records its old definition as version 1 beside the
// new version 2.
func TestFlowFromBeforeVersions(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	old := e.flowOf(t, setStep("old"))
	// As such a store holds it: no version number, no version records.
	stored, err := e.Store.Flow(ctx, e.project.ID, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	legacy := stored
	legacy.ID, legacy.LiveVersion, legacy.Version, legacy.VersionWrites = automation.NewID(automation.PrefixFlow), 0, 1, automation.VersionWrites{}
	if err := e.Store.CreateFlow(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	f, err := e.svc.Flow(ctx, e.project, legacy.ID)
	if err != nil || f.LiveVersion != 1 {
		t.Fatalf("legacy flow shows version %d, %v; want 1", f.LiveVersion, err)
	}
	list, err := e.svc.ListFlowVersions(ctx, e.project, legacy.ID, automation.PageRequest{})
	if err != nil || len(list.Data) != 1 || list.Data[0].Version != 1 {
		t.Fatalf("legacy versions = %+v, %v", list.Data, err)
	}
	v1, err := e.svc.FlowVersion(ctx, e.project, legacy.ID, 1)
	if err != nil || stepNames(v1.Definition.Steps) != "old " {
		t.Fatalf("legacy version 1 = %+v, %v", v1, err)
	}
	next := []automation.Step{setStep("new")}
	if f, err = e.svc.UpdateFlow(ctx, e.project, legacy.ID, automation.FlowInput{Steps: &next}); err != nil || f.LiveVersion != 2 {
		t.Fatalf("first publish = version %d, %v; want 2", f.LiveVersion, err)
	}
	stored1, err := e.Store.FlowVersion(ctx, e.project.ID, legacy.ID, 1)
	if err != nil || stepNames(stored1.Definition.Steps) != "old " {
		t.Fatalf("version 1 recorded with the first publish = %+v, %v", stored1, err)
	}
}

// TestOnErrorOfItsVersion: a run pinned to an older version that fails
// runs that version's onError steps, not the live version's.
func TestOnErrorOfItsVersion(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	failing := newRecorder(t, status(400))
	f := e.flowOf(t, automation.Step{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: failing.URL})
	onErr := func(name string) *[]automation.Step { return &[]automation.Step{setStep(name)} }
	f, err := e.svc.UpdateFlow(ctx, e.project, f.ID, automation.FlowInput{OnError: onErr("alert_v2")})
	if err != nil {
		t.Fatal(err)
	}
	first := e.start1(t, f) // pinned to version 2
	if at, err := e.svc.ExecuteRun(ctx, e.project.ID, first.ID); err != nil || at.Run.Status != automation.RunFailed ||
		len(at.Run.OnErrorSteps) != 1 || at.Run.OnErrorSteps[0].Name != "alert_v2" {
		t.Fatalf("first run = %s onError %+v, %v", at.Run.Status, at.Run.OnErrorSteps, err)
	}
	if _, err := e.svc.UpdateFlow(ctx, e.project, f.ID, automation.FlowInput{OnError: onErr("alert_v3")}); err != nil {
		t.Fatal(err)
	}
	r, err := e.svc.RetryRun(ctx, e.project, f.ID, first.ID, automation.RetryRequest{From: automation.RetryFromFailedStep})
	if err != nil {
		t.Fatal(err)
	}
	at, err := e.svc.ExecuteRun(ctx, e.project.ID, r.ID)
	if err != nil || at.Run.Status != automation.RunFailed || len(at.Run.OnErrorSteps) != 1 || at.Run.OnErrorSteps[0].Name != "alert_v2" {
		t.Fatalf("retried run on version 2 = %s onError %+v, %v; want version 2's alert_v2", at.Run.Status, at.Run.OnErrorSteps, err)
	}
}

// TestRetryOfAPrunedVersion: versions past versionsPerFlow are pruned
// once no RUNNING run is pinned to them; a retry from the failed step of
// a run whose version is gone is 409 VERSION_PRUNED (it could not execute
// it), and a retry from the start runs the live version.
func TestRetryOfAPrunedVersion(t *testing.T) {
	fe := flowtest.New(t, flowtest.Options{})
	p, _ := fe.Project(t, "pruned", automation.PlanTeam)
	p.LimitOverrides = map[string]int64{"versionsPerFlow": 2}
	ctx := context.Background()
	failing := newRecorder(t, status(400), status(400))
	f := fe.ActiveFlow(t, p, "pruned", automation.Step{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: failing.URL})
	old := fe.StartRef(t, f)
	if at, err := fe.Svc.ExecuteRun(ctx, p.ID, old.ID); err != nil || at.Run.Status != automation.RunFailed {
		t.Fatalf("first run = %s, %v; want FAILED", at.Run.Status, err)
	}
	for _, name := range []string{"v2", "v3"} {
		steps := []automation.Step{setStep(name)}
		if _, err := fe.Svc.UpdateFlow(ctx, p, f.ID, automation.FlowInput{Steps: &steps}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fe.Svc.FlowVersion(ctx, p, f.ID, 1); !automation.IsNotFound(err) {
		t.Fatalf("version 1 after two publishes with a bound of 2: %v, want it pruned", err)
	}
	_, err := fe.Svc.RetryRun(ctx, p, f.ID, old.ID, automation.RetryRequest{From: automation.RetryFromFailedStep})
	wantCode(t, "retry from the failed step on a pruned version", err, automation.ErrConflict, "VERSION_PRUNED")
	r, err := fe.Svc.RetryRun(ctx, p, f.ID, old.ID, automation.RetryRequest{From: automation.RetryFromStart})
	if err != nil || r.FlowVersion == nil || *r.FlowVersion != 3 {
		t.Fatalf("retry from the start = %v, %v; want a run of version 3", r.FlowVersion, err)
	}
}
