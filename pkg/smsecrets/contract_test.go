package smsecrets

import (
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
)

// TestContract runs the secrets contract every adapter passes, each subtest
// under its own prefix on the shared moto_server.
func TestContract(t *testing.T) {
	storetest.RunSecrets(t, func(t *testing.T) automation.Secrets {
		s, _ := newStore(t)
		return s
	})
}
