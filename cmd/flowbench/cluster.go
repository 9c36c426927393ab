package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"flowservice/pkg/pgstore/pgtest"
)

// clusterFigures is what one node count measured.
type clusterFigures struct {
	nodes            int
	accepted, failed int64
	window           time.Duration // first send to queue drained
	runsPerSec       float64
	p50, p99         time.Duration // accept→finished
	statements       map[string]float64
	perRun           map[string]float64 // statements per run, idle rate taken off
	idlePerSec       float64            // statements per second with no load, every node
	walPerRun        float64            // bytes
	xactsPerRun      float64            // write transactions (transaction IDs taken)
}

// statementKinds sorts pg_stat_statements' normalised texts by what they
// cost the database: rows written, rows read, the write lock, and
// transaction control.
func statementKind(q string) string {
	q = strings.ToLower(strings.TrimSpace(q))
	switch {
	case strings.Contains(q, "pg_advisory"):
		return "lock"
	case strings.Contains(q, "pg_notify"):
		return "other"
	case strings.HasPrefix(q, "insert"), strings.HasPrefix(q, "update"), strings.HasPrefix(q, "delete"),
		strings.HasPrefix(q, "with") && (strings.Contains(q, " update ") || strings.Contains(q, " insert ") || strings.Contains(q, " delete ")):
		return "write"
	case strings.HasPrefix(q, "select"), strings.HasPrefix(q, "with"):
		return "read"
	case strings.HasPrefix(q, "begin"), strings.HasPrefix(q, "commit"), strings.HasPrefix(q, "rollback"), strings.HasPrefix(q, "start transaction"):
		return "txn"
	default: // NOTIFY, LISTEN, SET
		return "other"
	}
}

var kinds = []string{"write", "read", "lock", "txn", "other"}

// benchCluster runs one and three flowd nodes on one throwaway PostgreSQL
// (the same machine's cores), drives a burst of webhooks round robin over
// them, and counts what the database did per run with pg_stat_statements,
// the WAL position and transaction IDs.
func benchCluster(ctx context.Context, c config, r *report) error {
	cl, err := pgtest.StartWith("shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all", "pg_stat_statements.max=5000")
	if err != nil {
		return err
	}
	defer cl.Stop()
	db, err := pgx.Connect(ctx, cl.URL("postgres"))
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return err
	}
	sink, sinkURL, err := okServer()
	if err != nil {
		return err
	}
	defer sink.Close()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	secret := base64.StdEncoding.EncodeToString(key)
	burst := max(c.e2eDur*2/3, 5*time.Second)

	var figs []clusterFigures
	for _, n := range []int{1, 3} {
		f, err := clusterLoad(ctx, c, cl, db, n, secret, sinkURL, burst)
		if err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
		figs = append(figs, f)
	}

	r.section("(k) A cluster on PostgreSQL: one node and three, and the database's work per run")
	r.para("One throwaway PostgreSQL (pkg/pgstore/pgtest with `pg_stat_statements` loaded; `fsync=off`, `synchronous_commit=off`: the disk is not measured) "+
		"and 1, then 3, flowd nodes (`FLOWD_BACKEND=postgres`, a schema each) on the same cores as the load generator. The flow is (c)'s: a SET step and "+
		"an HTTP POST to a sink in the harness. 32 senders send webhooks as fast as they are answered, round robin over the nodes, for %v; the window "+
		"ends when the queue (cluster-wide) is empty. Accept→finished is `finished − created` of each run. The statements are pg_stat_statements' calls "+
		"over the window, every node and every background poll included, less the rate measured over 3 s with the nodes idle just before; WAL is "+
		"`pg_current_wal_lsn()` before and after; write transactions are transaction IDs taken (`txid_current()` before and after).", burst)
	r.code("go run ./cmd/flowbench -only cluster")
	rows := [][]string{}
	row := func(name string, f func(clusterFigures) string) {
		line := []string{name}
		for _, fg := range figs {
			line = append(line, f(fg))
		}
		rows = append(rows, line)
	}
	row("webhooks accepted (refused)", func(f clusterFigures) string { return fmt.Sprintf("%d (%d)", f.accepted, f.failed) })
	row("durable runs/s, first send to drained", func(f clusterFigures) string { return fmt.Sprintf("**%.0f**", f.runsPerSec) })
	row("accept→finished p50 / p99", func(f clusterFigures) string { return ms(f.p50) + " / **" + ms(f.p99) + "**" })
	row("statements per run (idle rate taken off)", func(f clusterFigures) string {
		total := 0.0
		for _, k := range kinds {
			total += f.perRun[k]
		}
		return fmt.Sprintf("**%.1f**", total)
	})
	for _, k := range kinds {
		row("… "+map[string]string{"write": "INSERT/UPDATE/DELETE", "read": "SELECT", "lock": "advisory lock (the write lock)", "txn": "BEGIN/COMMIT", "other": "pg_notify (wake-ups), LISTEN, other"}[k],
			func(f clusterFigures) string { return fmt.Sprintf("%.1f", f.perRun[k]) })
	}
	row("write transactions per run", func(f clusterFigures) string { return fmt.Sprintf("%.2f", f.xactsPerRun) })
	row("WAL bytes per run", func(f clusterFigures) string { return fmt.Sprintf("%.0f", f.walPerRun) })
	row("statements per second, nodes idle", func(f clusterFigures) string { return fmt.Sprintf("%.0f", f.idlePerSec) })
	head := []string{"figure"}
	for _, f := range figs {
		head = append(head, fmt.Sprintf("%d node(s)", f.nodes))
	}
	r.table(head, rows)
	return nil
}

// clusterLoad starts n nodes on a new schema, measures their idle
// statements, then a burst, and stops them.
func clusterLoad(ctx context.Context, c config, cl *pgtest.Cluster, db *pgx.Conn, n int, secret, sinkURL string, burst time.Duration) (clusterFigures, error) {
	f := clusterFigures{nodes: n, statements: map[string]float64{}, perRun: map[string]float64{}}
	url, err := cl.NewSchema(ctx)
	if err != nil {
		return f, err
	}
	env := []string{"FLOWD_BACKEND=postgres", "FLOWD_DATABASE_URL=" + url, "FLOWD_SECRET_KEY=" + secret, "FLOWD_ALLOW_PRIVATE_NETWORKS=true"}
	var nodes []*flowd
	defer func() {
		for _, p := range nodes {
			p.stop()
			os.RemoveAll(p.dir)
		}
	}()
	for i := range n {
		dir, err := os.MkdirTemp("", "flowbench-cluster")
		if err != nil {
			return f, err
		}
		if i > 0 {
			// Only the first node prints the project's key; the harness
			// reads it from each node's directory.
			if err := os.WriteFile(filepath.Join(dir, "initial-api-key"), []byte(nodes[0].key+"\n"), 0o600); err != nil {
				return f, err
			}
		}
		p, err := startFlowd(ctx, c, dir, env...)
		if err != nil {
			os.RemoveAll(dir)
			return f, err
		}
		nodes = append(nodes, p)
	}
	flow := fmt.Sprintf(`{"name":"cluster","engine":"FLOW_BUILDER","steps":[`+
		`{"name":"s","type":"SET","values":{"ref":"{{ trigger.body.ref }}"}},`+
		`{"name":"call","type":"HTTP","method":"POST","url":%q,"body":{"run":"{{ run.id }}","ref":"{{ steps.s.ref }}"}}]}`, sinkURL+"/sink")
	id, err := nodes[0].createFlow(flow)
	if err != nil {
		return f, err
	}

	// The idle rate: duty renewals, worker polls and listener checks.
	counts := func() (map[string]float64, error) {
		rows, err := db.Query(ctx, `SELECT query, calls FROM pg_stat_statements
			WHERE query NOT ILIKE '%pg_stat_statements%' AND query NOT ILIKE '%pg_current_wal_lsn%' AND query NOT ILIKE '%txid_current%'`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[string]float64{}
		for rows.Next() {
			var q string
			var calls int64
			if err := rows.Scan(&q, &calls); err != nil {
				return nil, err
			}
			out[statementKind(q)] += float64(calls)
		}
		return out, rows.Err()
	}
	if _, err := db.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		return f, err
	}
	idle := 3 * time.Second
	select {
	case <-ctx.Done():
		return f, ctx.Err()
	case <-time.After(idle):
	}
	idleCounts, err := counts()
	if err != nil {
		return f, err
	}
	idleTotal := 0.0
	for _, v := range idleCounts {
		idleTotal += v
	}
	f.idlePerSec = idleTotal / idle.Seconds()

	if _, err := db.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		return f, err
	}
	var lsn0 string
	var xid0 int64
	if err := db.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text, txid_current()").Scan(&lsn0, &xid0); err != nil {
		return f, err
	}
	log.Printf("flowbench: cluster: %d node(s), burst for %v", n, burst)
	t0 := time.Now()
	var accepted, failed, turn atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for time.Since(t0) < burst && ctx.Err() == nil {
				p := nodes[int(turn.Add(1))%len(nodes)]
				resp, err := client.Post(p.base+"/api/v1/webhooks/"+id, "application/json", strings.NewReader(webhookBody))
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					accepted.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	end, err := waitDrained(ctx, nodes[0], 3*time.Minute)
	if err != nil {
		return f, err
	}
	f.window = end.Sub(t0)
	f.accepted, f.failed = accepted.Load(), failed.Load()
	if f.accepted == 0 {
		return f, fmt.Errorf("no webhook accepted")
	}
	// Read before the run listing adds its own statements.
	if f.statements, err = counts(); err != nil {
		return f, err
	}
	var wal float64
	var xid1 int64
	if err := db.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn), txid_current()", lsn0).Scan(&wal, &xid1); err != nil {
		return f, err
	}
	runs := float64(f.accepted)
	f.runsPerSec = runs / f.window.Seconds()
	f.walPerRun = wal / runs
	f.xactsPerRun = float64(xid1-xid0-1) / runs // less the measurement's own
	for _, k := range kinds {
		f.perRun[k] = max(0, f.statements[k]-idleCounts[k]/idle.Seconds()*f.window.Seconds()) / runs
	}
	all, err := nodes[0].runs(id)
	if err != nil {
		return f, err
	}
	var lat latencies
	for _, run := range all {
		if run.Finished != nil {
			lat = append(lat, run.Finished.Sub(run.Created))
		}
	}
	f.p50, f.p99 = lat.pct(50), lat.pct(99)
	log.Printf("flowbench: cluster: %d node(s): %.0f runs/s, p99 %v, %.1f statements per run", n, f.runsPerSec, f.p99, f.perRun["write"]+f.perRun["read"]+f.perRun["lock"]+f.perRun["txn"]+f.perRun["other"])
	return f, nil
}
