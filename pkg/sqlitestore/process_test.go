package sqlitestore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/sqlitestore"
)

// The child side of TestTwoProcesses: when the test binary is started with
// these variables, TestMain writes flows and exits instead of running tests.
const (
	childDBEnv      = "SQLITESTORE_TEST_CHILD_DB"
	childProjectEnv = "SQLITESTORE_TEST_CHILD_PROJECT"
	flowsPerProcess = 60
)

func TestMain(m *testing.M) {
	if path := os.Getenv(childDBEnv); path != "" {
		// Ready, then wait for the parent's go (its end of stdin closed), so
		// that both write at once.
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		if err := writeFlows(path, os.Getenv(childProjectEnv), "child"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeFlows opens its own Store on path and creates and enables flows.
func writeFlows(path, project, who string) error {
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, path)
	if err != nil {
		return err
	}
	defer s.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i := range flowsPerProcess {
		f := flow(project, "POST", fmt.Sprintf("%s/%d", who, i), now)
		if err := s.CreateFlow(ctx, f); err != nil {
			return fmt.Errorf("%s: create flow %d: %w", who, i, err)
		}
		f.Version, f.Status = 2, automation.FlowActive
		if err := s.PutFlow(ctx, f); err != nil {
			return fmt.Errorf("%s: enable flow %d: %w", who, i, err)
		}
	}
	return nil
}

// TestTwoProcesses is flowd and flowctl for real: this process and a child
// process open one new file at the same time (both migrate it) and write to
// it at once; neither sees an error and all the writes land.
func TestTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	project := automation.NewID(automation.PrefixProject)

	// The parent creates the file first, and the child migrates it again
	// (a no-op) while the parent may be writing.
	if err := writeFlows(path, project, "parent-0"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDBEnv+"="+path, childProjectEnv+"="+project)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	goSignal, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child: %q, %v; stderr %s", line, err, stderr.String())
	}
	if err := goSignal.Close(); err != nil {
		t.Fatal(err)
	}
	parentErr := writeFlows(path, project, "parent")
	childErr := cmd.Wait()
	if parentErr != nil {
		t.Errorf("parent: %v", parentErr)
	}
	if childErr != nil {
		t.Errorf("child: %v\n%s", childErr, stderr.String())
	}

	s := openAt(t, path)
	page, err := s.ListFlows(context.Background(), project, automation.ListQuery{Limit: 3 * flowsPerProcess, Status: "ACTIVE"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 3*flowsPerProcess {
		t.Errorf("%d active flows, want %d", len(page.Items), 3*flowsPerProcess)
	}
	// How much the two writers overlapped, for the curious: the number of
	// times creation order switches between parent and child.
	switches := 0
	for i := 1; i < len(page.Items); i++ {
		a, b := page.Items[i-1].Name, page.Items[i].Name
		if strings.Contains(a, "child") != strings.Contains(b, "child") {
			switches++
		}
	}
	t.Logf("creation order switched between the processes %d times", switches)
}
