package dynamostore_test

import (
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
)

// TestContract runs the store contract every adapter passes, each subtest on
// its own fresh tables on the shared moto_server.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) automation.Store {
		s, _, _ := newStore(t)
		return s
	})
}
