package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/datadir"
	"flowservice/pkg/sqlitestore"
)

// backlogRuns is the noisy project's backlog; backlogStep how long each of
// its runs' one HTTP call takes (a slow third party), so that the backlog
// lasts seconds on flowd's workers.
const (
	backlogRuns = 3000
	backlogStep = 100 * time.Millisecond
)

// benchBacklog measures (i): another project's run latency while one
// project has a 3,000-run backlog. The noisy project's runs are seeded
// due in the queue while flowd is stopped, each calling a loopback
// service that answers after backlogStep; flowd starts on them, and the
// quiet project's webhooks are paced at 10/s for 3 s at once. Its runs'
// accept→finished (finished − created) is the figure: with fair shares
// of the workers it stays near the run's own time, first come first
// served it is the backlog's drain time.
func benchBacklog(ctx context.Context, c config, r *report) error {
	slow, slowURL, err := slowServer(backlogStep)
	if err != nil {
		return err
	}
	defer slow.Close()
	sink, sinkURL, err := okServer()
	if err != nil {
		return err
	}
	defer sink.Close()
	env := "FLOWD_ALLOW_PRIVATE_NETWORKS=true"
	p, stop, err := startFreshFlowd(ctx, c, "backlog", env)
	if err != nil {
		return err
	}
	dir := p.dir
	defer func() { stop() }()
	noisyID, err := p.createFlow(fmt.Sprintf(`{"name":"noisy","engine":"FLOW_BUILDER","steps":[`+
		`{"name":"call","type":"HTTP","method":"POST","url":%q,"body":{"run":"{{ run.id }}"}}]}`, slowURL))
	if err != nil {
		return err
	}
	quietDef := fmt.Sprintf(`{"name":"quiet","engine":"FLOW_BUILDER","steps":[`+
		`{"name":"s","type":"SET","values":{"ref":"{{ trigger.body.ref }}"}},`+
		`{"name":"call","type":"HTTP","method":"POST","url":%q,"body":{"run":"{{ run.id }}"}}]}`, sinkURL+"/sink")
	quietTmpl, err := p.createFlow(quietDef)
	if err != nil {
		return err
	}
	p.stop()
	quiet, err := seedBacklog(ctx, dir, noisyID, quietTmpl)
	if err != nil {
		return err
	}
	log.Printf("flowbench: backlog: %d runs of one project seeded; starting flowd on them", backlogRuns)
	if p, err = startFlowd(ctx, c, dir, env); err != nil {
		return err
	}
	stop = func() { p.stop(); os.RemoveAll(dir) }
	t0 := time.Now()
	sent, failed, _ := pace(ctx, p.base+"/api/v1/webhooks/"+quiet.ID, webhookBody, 10, 3*time.Second, 4)
	drained, err := waitDrained(ctx, p, 5*time.Minute)
	if err != nil {
		return err
	}
	p.stop()
	lat, err := quietLatencies(ctx, dir, quiet)
	if err != nil {
		return err
	}
	r.section("(i) Another project's run latency while one project has a 3,000-run backlog")
	r.para("A fresh flowd (default workers) starts with %d runs of one project already due in its queue, each an HTTP call to a loopback "+
		"service that answers after %v (seeded through the store while flowd is stopped). At once a second project's flow (SET + HTTP to a "+
		"loopback sink that answers at once) gets webhooks paced at 10/s for 3 s. Its runs' accept→finished is `finished − created`, "+
		"read back from the store; the backlog's drain time is from flowd's start until the queue is empty.", backlogRuns, backlogStep)
	r.code("go run ./cmd/flowbench -only backlog -out /tmp/backlog.md")
	r.table([]string{"figure", "value"}, [][]string{
		{"quiet project's accept→finished p50 / p99", fmt.Sprintf("**%s / %s** (%d runs; %d webhooks sent, %d refused)", ms(lat.pct(50)), ms(lat.pct(99)), len(lat), sent, failed)},
		{"noisy project's backlog drained in", drained.Sub(t0).Round(time.Millisecond).String()},
	})
	return nil
}

// seedBacklog adds the noisy flow's backlog, due now, and makes the quiet
// project with a copy of the quiet template flow, enabled; the template
// (made in the first project for its definition) is left alone.
func seedBacklog(ctx context.Context, dir, noisyID, quietTmpl string) (automation.Flow, error) {
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, datadir.DBFile))
	if err != nil {
		return automation.Flow{}, err
	}
	defer st.Close()
	noisy, err := st.FlowByID(ctx, noisyID)
	if err != nil {
		return automation.Flow{}, err
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	proj := automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "quiet", Plan: automation.PlanEnterprise, Created: now}
	if err := st.CreateProject(ctx, proj); err != nil {
		return automation.Flow{}, err
	}
	quiet, err := st.FlowByID(ctx, quietTmpl)
	if err != nil {
		return automation.Flow{}, err
	}
	quiet.ID, quiet.Project, quiet.Name, quiet.Version = automation.NewID("flw"), proj.ID, "quiet", 1
	if err := st.CreateFlow(ctx, quiet); err != nil {
		return automation.Flow{}, err
	}
	err = parallel(ctx, backlogRuns, 32, func(i int) error {
		at := now.Add(time.Duration(i-backlogRuns) * time.Millisecond)
		return st.Enqueue(ctx, automation.Run{
			ID: automation.NewID("run"), Project: noisy.Project, FlowID: noisy.ID, Status: automation.RunRunning,
			Trigger: automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + noisy.ID,
				Headers: map[string]string{"content-type": "application/json"}, Body: []byte(webhookBody)},
			Steps: []automation.StepResult{}, Created: at,
		})
	})
	return quiet, err
}

// quietLatencies reads the quiet flow's runs from the store.
func quietLatencies(ctx context.Context, dir string, quiet automation.Flow) (latencies, error) {
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, datadir.DBFile))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var lat latencies
	q := automation.ListQuery{Limit: automation.MaxPageSize}
	for {
		page, err := st.ListRuns(ctx, quiet.Project, quiet.ID, q)
		if err != nil {
			return nil, err
		}
		for _, run := range page.Items {
			if run.Finished != nil {
				lat = append(lat, run.Finished.Sub(run.Created))
			}
		}
		if page.Next == "" {
			return lat, nil
		}
		q.After = page.Next
	}
}

// slowServer answers every request after d, like a slow third party.
func slowServer(d time.Duration) (*http.Server, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(d)
		ceiling(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	return srv, "http://" + l.Addr().String(), nil
}
