package pgstore_test

import (
	"context"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/queuetest"
	"flowservice/pkg/automation/storetest"
	"flowservice/pkg/pgstore"
	"flowservice/pkg/pgstore/pgtest"
)

// One throwaway cluster for the whole test binary; each test opens a store
// on a schema of its own.
func TestMain(m *testing.M) { pgtest.Main(m) }

// open opens a store on a new schema and closes it when the test ends.
func open(t testing.TB, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pgtest.URL(t), opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) automation.Store { return open(t) })
}

func TestContractCached(t *testing.T) {
	storetest.Run(t, func(t *testing.T) automation.Store { return open(t, pgstore.CacheFlows(time.Minute)) })
}

func TestRunContract(t *testing.T) {
	storetest.RunRuns(t, func(t *testing.T) storetest.RunEnv {
		s := open(t)
		return storetest.RunEnv{Store: s, Runs: s, Create: s.Enqueue, CreateClaimed: s.EnqueueClaimed, InsertFinished: s.InsertFinishedRun}
	})
}

func TestAlertsContract(t *testing.T) {
	storetest.RunAlerts(t, func(t *testing.T) storetest.AlertsEnv {
		s := open(t)
		return storetest.AlertsEnv{
			RunEnv: storetest.RunEnv{Store: s, Runs: s, Create: s.Enqueue, CreateClaimed: s.EnqueueClaimed, InsertFinished: s.InsertFinishedRun},
			Alerts: s, Waitpoints: s,
		}
	})
}

func TestOAuthAppsContract(t *testing.T) {
	storetest.RunOAuthApps(t, func(t *testing.T) automation.OAuthAppStore { return open(t) })
}

// TestQueueContract runs the run-queue suite that the SQLite queue and SQS
// pass.
func TestQueueContract(t *testing.T) {
	queuetest.Run(t, func(t *testing.T) queuetest.Env {
		s := open(t)
		return queuetest.Env{Store: s, Runs: s, Queue: s, Next: func(ctx context.Context) (automation.QueueMessage, func(), bool) {
			e, ok, err := s.ClaimDue(ctx, time.Now(), time.Minute)
			id, project := e.RunID, e.Project
			if err != nil {
				t.Fatalf("claim due: %v", err)
			}
			if !ok {
				return automation.QueueMessage{}, nil, false
			}
			ack := func() {
				if err := s.Ack(ctx, id); err != nil {
					t.Errorf("ack %s: %v", id, err)
				}
			}
			return automation.QueueMessage{Kind: automation.MessageRun, Project: project, RunID: id}, ack, true
		}}
	})
}

// TestUsersContract runs the people contract on PostgreSQL.
func TestUsersContract(t *testing.T) {
	storetest.RunUsers(t, func(t *testing.T) storetest.UsersEnv {
		s := open(t)
		return storetest.UsersEnv{Store: s, Users: s}
	})
}

// TestRateBucketsContract: two nodes' stores on one database share the
// projects' rate buckets.
func TestRateBucketsContract(t *testing.T) {
	storetest.RunRateBuckets(t, func(t *testing.T) (a, b automation.RateBuckets) {
		url := pgtest.URL(t)
		var nodes [2]*pgstore.Store
		for i := range nodes {
			s, err := pgstore.Open(context.Background(), url)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			nodes[i] = s
		}
		return nodes[0].Buckets(), nodes[1].Buckets()
	})
}
