package automation_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"flowservice/pkg/automation"
)

func n(v int64) *int64 { return &v }

func TestPlanLimits(t *testing.T) {
	free := automation.Limits{WebhooksPerSecond: n(10), ConcurrentRuns: n(5), OutboundPerMinute: n(600), Flows: n(50), StoredBytes: n(1 << 30), RunsPerMinute: n(120), VersionsPerFlow: n(20), AITokensPerDay: n(100_000)}
	team := automation.Limits{WebhooksPerSecond: n(100), ConcurrentRuns: n(50), OutboundPerMinute: n(6000), Flows: n(1000), StoredBytes: n(20 << 30), RunsPerMinute: n(1200), VersionsPerFlow: n(100), AITokensPerDay: n(5_000_000)}
	for plan, want := range map[automation.Plan]automation.Limits{
		automation.PlanFree: free, automation.PlanTeam: team, automation.PlanEnterprise: {VersionsPerFlow: n(1000)},
	} {
		if d := cmp.Diff(want, automation.Project{Plan: plan}.Limits()); d != "" {
			t.Errorf("%s limits (-want +got):\n%s", plan, d)
		}
	}
	p := automation.Project{Plan: automation.PlanFree, LimitOverrides: map[string]int64{"flows": 2, "storedBytes": automation.Unlimited, "gone": 9}}
	want := free
	want.Flows, want.StoredBytes = n(2), nil
	if d := cmp.Diff(want, p.Limits()); d != "" {
		t.Errorf("overridden FREE limits (-want +got):\n%s", d)
	}
}

func TestParseLimit(t *testing.T) {
	for _, tt := range []struct {
		name, value string
		want        int64
		set, bad    bool
	}{
		{"flows", "20", 20, true, false},
		{"flows", "0", 0, true, false},
		{"webhooksPerSecond", "Unlimited", automation.Unlimited, true, false},
		{"storedBytes", "default", 0, false, false},
		{"flows", "-1", 0, false, true},
		{"flows", "many", 0, false, true},
		{"workers", "3", 0, false, true},
	} {
		v, set, err := automation.ParseLimit(tt.name, tt.value)
		if (err != nil) != tt.bad || v != tt.want || set != tt.set {
			t.Errorf("ParseLimit(%s, %q) = %d, %v, %v", tt.name, tt.value, v, set, err)
		}
	}
}
