package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// The project page shows the plan, each limit (with an operator's
// override) and the usage GET /api/v1/project reports.
func TestProjectPage(t *testing.T) {
	e := newEnv(t)
	p, key := e.project(t, "small", automation.PlanFree)
	if _, err := e.svc.SetProjectLimits(context.Background(), p.Name, map[string]int64{"outboundPerMinute": 120}, nil); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	wantRedirect(t, b.signin(key), "/ui/flows")
	page := b.get("/ui/project")
	wantPage(t, page, http.StatusOK, `href="/ui/project" aria-current="page"`, "Project small", "FREE",
		"<code>webhooksPerSecond</code>", "10 a second", "5 at once", "120 HTTP requests a minute", "50 flows", "1.0 GiB",
		"webhooks 429, old runs still purged", "<code>versionsPerFlow</code>", "20 versions a flow",
		"<code>aiTokensPerDay</code>", "100,000 model tokens a day (UTC)", "0 today", "AI steps fail QUOTA_EXCEEDED")
	// Usage: no flows yet, and the bytes the project keeps (none).
	if !strings.Contains(page.body, "<td>0</td>") || !strings.Contains(page.body, "<td>0 B</td>") {
		t.Errorf("the project page does not show the usage (0 flows, 0 B):\n%s", page.body)
	}

	// The ENTERPRISE project of the environment is unlimited.
	b2 := e.browser(t)
	wantRedirect(t, b2.signin(e.key), "/ui/flows")
	wantPage(t, b2.get("/ui/project"), http.StatusOK, "ENTERPRISE", "unlimited")
}

func TestByteSizeAndGroup(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1 << 30: "1.0 GiB", 20 << 30: "20.0 GiB", 1536: "1.5 KiB"} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{5: "5", 6000: "6,000", 1234567: "1,234,567"} {
		if got := group(n); got != want {
			t.Errorf("group(%d) = %q, want %q", n, got, want)
		}
	}
}
