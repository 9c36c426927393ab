package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
)

func TestWaitpointContract(t *testing.T) {
	storetest.RunWaitpoints(t, func(t *testing.T) automation.WaitpointStore {
		return openAt(t, filepath.Join(t.TempDir(), "flows.db"))
	})
}
