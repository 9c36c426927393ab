package dynamostore_test

import (
	"testing"

	"flowservice/pkg/automation/storetest"
	"flowservice/pkg/dynamostore"
)

// TestUsersContract runs the people contract on moto.
func TestUsersContract(t *testing.T) {
	t.Parallel() // fresh tables of its own on the shared moto_server
	storetest.RunUsers(t, func(t *testing.T) storetest.UsersEnv {
		_, client, tables := newStore(t)
		s := dynamostore.New(&serialized{API: client}, tables)
		return storetest.UsersEnv{Store: s, Users: s}
	})
}
