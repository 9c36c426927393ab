package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
	"flowservice/pkg/sqlitestore"
)

// openAt opens a store on path and closes it when the test ends.
func openAt(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) automation.Store {
		return openAt(t, filepath.Join(t.TempDir(), "flows.db"))
	})
}

// TestTwoInstances is flowd and flowctl on one file: each sees the other's
// writes at once, and route conflicts hold across them.
func TestTwoInstances(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	server, cli := openAt(t, path), openAt(t, path)
	now := time.Now().UTC().Truncate(time.Millisecond)

	p := automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "default", Plan: automation.PlanEnterprise, Created: now}
	if err := cli.CreateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, err := server.ProjectByName(ctx, "default"); err != nil || got.ID != p.ID {
		t.Fatalf("server ProjectByName = %+v, %v; want %s", got, err, p.ID)
	}
	err := server.CreateProject(ctx, automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "default", Plan: automation.PlanFree, Created: now})
	if !errors.Is(err, automation.ErrConflict) {
		t.Fatalf("second default through the other instance: %v, want a conflict", err)
	}

	f := flow(p.ID, "POST", "shared/path", now)
	if err := server.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	if got, err := cli.FlowByID(ctx, f.ID); err != nil || got.Name != f.Name {
		t.Fatalf("cli FlowByID = %+v, %v", got, err)
	}
	if err := cli.CreateFlow(ctx, flow(p.ID, "POST", "shared/path", now)); !errors.Is(err, automation.ErrConflict) {
		t.Fatalf("route taken through the other instance: %v, want a conflict", err)
	}
	f.Version, f.Status = 2, automation.FlowActive
	if err := cli.PutFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	if got, err := server.Flow(ctx, p.ID, f.ID); err != nil || got.Status != automation.FlowActive || got.Version != 2 {
		t.Fatalf("server Flow after cli PutFlow = %s v%d, %v", got.Status, got.Version, err)
	}
	if err := server.PutFlow(ctx, f); !errors.Is(err, automation.ErrConflict) {
		t.Fatalf("stale PutFlow through the other instance: %v, want FLOW_MODIFIED", err)
	}
}

// flow is a workflow builder webhook flow on method and path.
func flow(project, method, path string, at time.Time) automation.Flow {
	return automation.Flow{
		ID: automation.NewID(automation.PrefixFlow), Project: project, Name: "flow on " + path,
		Status: automation.FlowInactive, Engine: automation.WorkflowBuilder, TriggerType: automation.TriggerWebhook,
		Created: at, Updated: at, Version: 1,
		Trigger: automation.Trigger{Type: automation.TriggerWebhook,
			Webhook: &automation.Webhook{HTTPMethod: method, Path: path}},
		Steps: []automation.Step{},
	}
}

// TestMigrationsIdempotent reopens a file: nothing is applied twice, data
// survives, and the recorded version is the length of the list.
func TestMigrationsIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	now := time.Now().UTC().Truncate(time.Millisecond)
	p := automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "keep", Plan: automation.PlanTeam, Created: now}

	for i := range 3 {
		s, err := sqlitestore.Open(ctx, path)
		if err != nil {
			t.Fatalf("open #%d: %v", i+1, err)
		}
		if i == 0 {
			if err := s.CreateProject(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Project(ctx, p.ID)
		if cerr := s.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil || got.Name != "keep" {
			t.Fatalf("open #%d: Project = %+v, %v", i+1, got, err)
		}
	}

	db := rawDB(t, path)
	var n, maxV int
	if err := db.QueryRow(`SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &maxV); err != nil {
		t.Fatal(err)
	}
	if n != sqlitestore.SchemaVersion || maxV != sqlitestore.SchemaVersion {
		t.Errorf("schema_migrations: %d rows, max %d; want %d of each", n, maxV, sqlitestore.SchemaVersion)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
}

// TestConcurrentOpen opens one new file from many goroutines at once, as two
// processes starting together would: the migrations run once, no open fails.
func TestConcurrentOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "race.db")
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			s, err := sqlitestore.Open(context.Background(), path)
			if err != nil {
				errs <- err
				return
			}
			errs <- s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
	}
	var n int
	if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != sqlitestore.SchemaVersion {
		t.Errorf("schema_migrations has %d rows, want %d", n, sqlitestore.SchemaVersion)
	}
}

// TestConcurrentWriters has 8 goroutines, on two Store instances of one
// file, create flows and update them at once: BEGIN IMMEDIATE and the busy
// timeout queue them, so none fails with SQLITE_BUSY.
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	stores := []*sqlitestore.Store{openAt(t, path), openAt(t, path)}
	project := automation.NewID(automation.PrefixProject)
	now := time.Now().UTC().Truncate(time.Millisecond)
	const writers, each = 8, 25

	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		s := stores[w%2]
		wg.Go(func() {
			for i := range each {
				f := flow(project, "POST", fmt.Sprintf("w%d/f%d", w, i), now)
				if err := s.CreateFlow(ctx, f); err != nil {
					errs <- err
					continue
				}
				// A read and a write in between, as the Service's update does.
				got, err := s.Flow(ctx, project, f.ID)
				if err != nil {
					errs <- err
					continue
				}
				got.Version++
				got.Status = automation.FlowActive
				if err := s.PutFlow(ctx, got); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent write: %v", err)
		if strings.Contains(err.Error(), "SQLITE_BUSY") || strings.Contains(err.Error(), "locked") {
			t.Fatalf("a writer hit the lock: %v", err)
		}
	}

	var total int
	after := ""
	for {
		page, err := stores[0].ListFlows(ctx, project, automation.ListQuery{Limit: 100, After: after, Status: "ACTIVE"})
		if err != nil {
			t.Fatal(err)
		}
		total += len(page.Items)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if total != writers*each {
		t.Errorf("%d active flows, want %d", total, writers*each)
	}
}

// TestPutFlowKeepsStatsColumns sets run stats the way the run recorder will
// (in their columns) and checks that a PutFlow keeps them and reads show
// them.
func TestPutFlowKeepsStatsColumns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "stats.db")
	s := openAt(t, path)
	now := time.Now().UTC().Truncate(time.Millisecond)
	f := flow(automation.NewID(automation.PrefixProject), "GET", "stats", now)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	last := now.Add(-time.Hour)
	if _, err := rawDB(t, path).Exec(`UPDATE flows SET finished = 8, succeeded = 7, last_run = ? WHERE id = ?`,
		last.Format(time.RFC3339Nano), f.ID); err != nil {
		t.Fatal(err)
	}
	f.Version, f.Name = 2, "renamed"
	f.Stats = automation.FlowStats{Finished: 1} // a stale copy: must be ignored
	if err := s.PutFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	got, err := s.Flow(ctx, f.Project, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "renamed" || got.Stats.Finished != 8 || got.Stats.Succeeded != 7 ||
		got.Stats.LastRun == nil || !got.Stats.LastRun.Equal(last) {
		t.Fatalf("after PutFlow: name %q stats %+v; want renamed, 8/7 and last run %v", got.Name, got.Stats, last)
	}
	if w := got.WithStats(); w.RunCount != 8 || w.SuccessRate != 87.5 {
		t.Errorf("WithStats = %d runs, %v%%; want 8, 87.5", w.RunCount, w.SuccessRate)
	}
}

// TestBlobs covers the byte store sealedsecrets builds on.
func TestBlobs(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "blobs.db"))
	if _, err := s.Blob(ctx, "p", "n"); !errors.Is(err, automation.ErrNotFound) {
		t.Fatalf("Blob(missing) = %v, want ErrNotFound", err)
	}
	for _, v := range [][]byte{[]byte("one"), {}, {0, 0xff}} {
		if err := s.PutBlob(ctx, "p", "n", v); err != nil {
			t.Fatal(err)
		}
		got, err := s.Blob(ctx, "p", "n")
		if err != nil || string(got) != string(v) {
			t.Fatalf("Blob = %q, %v; want %q", got, err, v)
		}
	}
	if err := s.DeleteBlob(ctx, "p", "n"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBlob(ctx, "p", "n"); err != nil {
		t.Fatalf("DeleteBlob(missing) = %v, want nil", err)
	}
	if _, err := s.Blob(ctx, "p", "n"); !errors.Is(err, automation.ErrNotFound) {
		t.Fatalf("Blob after delete = %v, want ErrNotFound", err)
	}
}

func TestOpenRejectsBadPath(t *testing.T) {
	for _, p := range []string{"", "a?b.db", filepath.Join(t.TempDir(), "missing-dir", "x.db")} {
		if s, err := sqlitestore.Open(context.Background(), p); err == nil {
			_ = s.Close()
			t.Errorf("Open(%q) succeeded, want an error", p)
		}
	}
}

// rawDB opens the file directly, for what the Store does not expose.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
