package automation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// TestStoredBytesQuota: once a project's measured usage is over its
// storedBytes quota, deliveries are refused (429 QUOTA_EXCEEDED naming
// limits.storedBytes, with a wait); the retention purge still removes old
// runs, and once it has brought the project under its quota, the next
// measurement lets deliveries in again.
func TestStoredBytesQuota(t *testing.T) {
	var offset atomic.Int64 // how far the test has moved the clock
	base := time.Now()
	clock := func() time.Time { return base.Add(time.Duration(offset.Load())) }
	e := newEnv(t, automation.RunPolicy{Retention: time.Hour}, clock)
	ctx := context.Background()
	e.Project(t, "free", automation.PlanFree)
	free, err := e.svc.SetProjectLimits(ctx, "free", map[string]int64{"storedBytes": 50_000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := flowtest.StatusServer(t, 200)
	f := e.ActiveFlow(t, free, "keeper", flowtest.CallStep(srv.URL))
	body, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 100_000)})
	r, err := e.svc.StartRun(ctx, f, automation.TriggerData{Method: "POST", Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID); err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("run = %s, %v", at.Run.Status, err)
	}

	info, err := e.svc.ProjectInfo(ctx, free)
	if err != nil {
		t.Fatal(err)
	}
	if info.Usage.StoredBytes < 100_000 || info.Limits.StoredBytes == nil || *info.Limits.StoredBytes != 50_000 {
		t.Fatalf("usage %d of limit %v after a 100 KB run; want over 100000 of 50000", info.Usage.StoredBytes, info.Limits.StoredBytes)
	}
	err = e.svc.AdmitDelivery(ctx, free.ID)
	var rl *automation.RateLimited
	if !errors.As(err, &rl) || rl.Err.Code != "QUOTA_EXCEEDED" || !strings.Contains(rl.Err.Message, "limits.storedBytes") || rl.RetryAfter <= 0 {
		t.Fatalf("delivery over storedBytes = %v; want RateLimited QUOTA_EXCEEDED naming limits.storedBytes with a wait", err)
	}
	// Another project is not refused.
	if err := e.svc.AdmitDelivery(ctx, e.project.ID); err != nil {
		t.Fatalf("another project's delivery = %v", err)
	}

	// Past the retention the purge removes the run, quota or not.
	offset.Store(int64(2 * time.Hour))
	if n, err := e.svc.PurgeRuns(ctx); err != nil || n != 1 {
		t.Fatalf("purge over the quota = %d, %v; want 1 run removed", n, err)
	}
	if info, err = e.svc.ProjectInfo(ctx, free); err != nil || info.Usage.StoredBytes >= 50_000 {
		t.Fatalf("usage after the purge = %d, %v; want under 50000", info.Usage.StoredBytes, err)
	}
	if err := e.svc.AdmitDelivery(ctx, free.ID); err != nil {
		t.Fatalf("delivery after the purge = %v, want admitted", err)
	}
}
