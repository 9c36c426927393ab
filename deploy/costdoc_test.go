package deploy

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCostDocTotals: the per-webhook-and-run table of docs/cost.md adds
// up. Its total row is recomputed from the phase rows (calls, write
// units, read units: the first number of each cell), so a row changed
// without the sum, or the sum without the rows, fails here rather than
// drifting (it once said 12 write units for rows of 5 and 10).
func TestCostDocTotals(t *testing.T) {
	raw, err := os.ReadFile("../docs/cost.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "| phase | DynamoDB calls | write units | read units |") {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatal("docs/cost.md: no table headed | phase | DynamoDB calls | write units | read units |")
	}
	first := regexp.MustCompile(`\d+`)
	cells := func(l string) []int {
		parts := strings.Split(strings.Trim(l, "|"), "|")
		var out []int
		for _, c := range parts[1:4] {
			n, err := strconv.Atoi(first.FindString(c))
			if err != nil {
				t.Fatalf("docs/cost.md: no number in %q (%s)", c, l)
			}
			out = append(out, n)
		}
		return out
	}
	sum := make([]int, 3)
	var total []int
	rows := 0
	for _, l := range lines[start+2:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		if strings.Contains(strings.Split(l, "|")[1], "total") {
			total = cells(l)
			break
		}
		rows++
		c := cells(l)
		for i, n := range c {
			sum[i] += n
		}
		// Each phase is what the cost test holds the functions to.
		want := map[string][]int{
			"webhook": {maxWebhookCalls, maxWebhookWriteUnits, maxWebhookReadUnits},
			"run":     {maxRunCalls, maxRunWriteUnits, maxRunReadUnits},
		}[strings.Fields(strings.Split(l, "|")[1])[0]]
		if want != nil && !slices.Equal(c, want) {
			t.Errorf("docs/cost.md: %s; TestDynamoCostPerWebhookAndRun's bounds are %v", l[:min(len(l), 60)], want)
		}
	}
	if rows < 2 || total == nil {
		t.Fatalf("docs/cost.md: %d phase rows, total %v", rows, total)
	}
	for i, name := range []string{"DynamoDB calls", "write units", "read units"} {
		if sum[i] != total[i] {
			t.Errorf("docs/cost.md: the phases' %s add to %d, the total row says %d", name, sum[i], total[i])
		}
	}
	// The million-webhook table prices the same write units.
	m := regexp.MustCompile(`\| DynamoDB writes \(on demand\) \| [^|]+ \| \*\*(\d+) M\*\*`).FindSubmatch(raw)
	if m == nil || string(m[1]) != strconv.Itoa(sum[1]) {
		t.Errorf("docs/cost.md: the million-webhook table prices %q M write units, the rows %d per webhook and run", m, sum[1])
	}
}
