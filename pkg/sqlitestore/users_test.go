package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"flowservice/pkg/automation/storetest"
)

// TestUsersContract runs the people contract on SQLite.
func TestUsersContract(t *testing.T) {
	storetest.RunUsers(t, func(t *testing.T) storetest.UsersEnv {
		s := openAt(t, filepath.Join(t.TempDir(), "users.db"))
		return storetest.UsersEnv{Store: s, Users: s}
	})
}
