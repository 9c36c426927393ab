package dynamostore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
	"flowservice/pkg/dynamostore"
)

// TestContract runs the store contract every adapter passes, each subtest on
// its own fresh tables on the shared moto_server.
func TestContract(t *testing.T) {
	t.Parallel() // fresh tables of its own on the shared moto_server, which serves requests on threads
	storetest.Run(t, func(t *testing.T) automation.Store {
		// One write at a time, as for runs (see serialized): the
		// SampleTakeRace subtest claims one arming from several goroutines.
		_, client, tables := newStore(t)
		return dynamostore.New(&serialized{API: client}, tables)
	})
}

// TestRunContract runs the run store contract; Create is the run item write
// that the SQS run queue makes before it sends the message.
func TestRunContract(t *testing.T) {
	t.Parallel() // fresh tables of its own on the shared moto_server, which serves requests on threads
	storetest.RunRuns(t, func(t *testing.T) storetest.RunEnv {
		_, client, tables := newStore(t)
		s := dynamostore.New(&serialized{API: client}, tables)
		return storetest.RunEnv{Store: s, Runs: s, Create: s.CreateRun}
	})
}

// serialized makes one request at a time. DynamoDB evaluates a write's
// condition and applies the write atomically, so of simultaneous claims of
// one run exactly one passes; moto's server handles requests on threads
// without that guarantee (two of eight claims won in a trial). Taking turns
// restores what DynamoDB promises, and the contract still checks that the
// condition lets exactly one claim through and names the losers' reason.
type serialized struct {
	mu sync.Mutex
	dynamostore.API
}

func (s *serialized) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.API.UpdateItem(ctx, in, opts...)
}

func (s *serialized) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.API.TransactWriteItems(ctx, in, opts...)
}

// TestOAuthAppsContract runs the OAuth2 apps contract on moto.
func TestOAuthAppsContract(t *testing.T) {
	storetest.RunOAuthApps(t, func(t *testing.T) automation.OAuthAppStore {
		_, client, tables := newStore(t)
		return dynamostore.New(client, tables)
	})
}

// TestWaitpointContract runs the waitpoint contract on moto, one write at
// a time (serialized): the races of the suite rest on conditional writes.
func TestWaitpointContract(t *testing.T) {
	t.Parallel() // fresh tables of its own on the shared moto_server
	storetest.RunWaitpoints(t, func(t *testing.T) automation.WaitpointStore {
		_, client, tables := newStore(t)
		return dynamostore.New(&serialized{API: client}, tables)
	})
}
