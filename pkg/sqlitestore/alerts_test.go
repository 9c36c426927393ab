package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"flowservice/pkg/automation/storetest"
)

func TestAlertsContract(t *testing.T) {
	storetest.RunAlerts(t, func(t *testing.T) storetest.AlertsEnv {
		s := openAt(t, filepath.Join(t.TempDir(), "alerts.db"))
		return storetest.AlertsEnv{
			RunEnv: storetest.RunEnv{Store: s, Runs: s, Create: s.Enqueue, CreateClaimed: s.EnqueueClaimed, InsertFinished: s.InsertFinishedRun},
			Alerts: s,
		}
	})
}
