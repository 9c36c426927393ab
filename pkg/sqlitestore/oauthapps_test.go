package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
)

func TestOAuthAppsContract(t *testing.T) {
	storetest.RunOAuthApps(t, func(t *testing.T) automation.OAuthAppStore {
		return openAt(t, filepath.Join(t.TempDir(), "apps.db"))
	})
}
