package queuetest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/queuetest"
	"flowservice/pkg/sqlitestore"
)

// TestEmbedded runs the queue contract against the embedded queue: the run
// and its queue entry in one SQLite transaction. The SQS queue runs it in
// pkg/sqsqueue, on moto.
func TestEmbedded(t *testing.T) {
	queuetest.Run(t, func(t *testing.T) queuetest.Env {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "queue.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
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
