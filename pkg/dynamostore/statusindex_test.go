package dynamostore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"flowservice/pkg/automation"
	"flowservice/pkg/awstest"
	"flowservice/pkg/dynamostore"
)

// countingAPI counts the reads a search makes.
type countingAPI struct {
	dynamostore.API
	queries, batchGets atomic.Int64
}

func (c *countingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.queries.Add(1)
	return c.API.Query(ctx, in, opts...)
}

func (c *countingAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.batchGets.Add(1)
	return c.API.BatchGetItem(ctx, in, opts...)
}

// TestStatusSearchIsOneQuery: across a project of 500 runs, 1 in 25
// FAILED, a page of GET /runs?status=FAILED is one query (and one
// BatchGetItem for the summaries), the next page too: the status has an
// index partition of its own, not a filter over every run (which would
// read about 25 runs for each FAILED one).
func TestStatusSearchIsOneQuery(t *testing.T) {
	t.Parallel() // fresh tables of its own on the shared moto_server, which serves requests on threads
	ctx := context.Background()
	client := dynamodb.NewFromConfig(awstest.Start(t))
	tables := dynamostore.TableNames(awstest.UniqueName(t, "fs"))
	if err := dynamostore.CreateTables(ctx, client, tables); err != nil {
		t.Fatal(err)
	}
	counting := &countingAPI{API: client}
	store := dynamostore.New(counting, tables)
	const project, total, every = "prj_search", 500, 25
	f := newFlow(project, "flw_search", 0)
	if err := store.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, total)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				status := automation.RunSucceeded
				if i%every == 0 {
					status = automation.RunFailed
				}
				created := base.Add(time.Duration(i) * time.Second)
				r := automation.Run{
					ID: automation.NewRunID(created), Project: project, FlowID: f.ID, Status: status,
					Trigger: automation.TriggerData{Method: "POST", Headers: map[string]string{}, Query: map[string]string{}},
					Steps:   []automation.StepResult{}, Created: created,
				}
				if err := store.CreateRun(ctx, r); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range total {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	counting.queries.Store(0)
	counting.batchGets.Store(0)
	q := automation.RunQuery{ListQuery: automation.ListQuery{Limit: 10, Status: string(automation.RunFailed)}}
	var got int
	for page := 1; ; page++ {
		before := counting.queries.Load()
		p, err := store.SearchRuns(ctx, project, q)
		if err != nil {
			t.Fatal(err)
		}
		if n := counting.queries.Load() - before; n != 1 {
			t.Errorf("page %d: %d queries, want 1", page, n)
		}
		for _, r := range p.Items {
			if r.Status != automation.RunFailed {
				t.Errorf("run %s is %s in a FAILED search", r.ID, r.Status)
			}
		}
		got += len(p.Items)
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	if got != total/every {
		t.Errorf("%d FAILED runs found, want %d", got, total/every)
	}
	if n := counting.batchGets.Load(); n > 2 {
		t.Errorf("%d BatchGetItem calls for two pages, want one each", n)
	}
}
