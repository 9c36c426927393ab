package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// UsersEnv is a store of people together with the store of the keys and
// projects they go with (one adapter implements both).
type UsersEnv struct {
	Store automation.Store
	Users automation.UserStore
}

// RunUsers runs the people contract (automation.UserStore): users,
// memberships, set-up links used once, sessions, and personal keys
// revoked with the membership.
func RunUsers(t *testing.T, open func(t *testing.T) UsersEnv) {
	t.Run("Users", func(t *testing.T) { testUsers(t, open(t)) })
	t.Run("Memberships", func(t *testing.T) { testMemberships(t, open(t)) })
	t.Run("RemovalRevokesKeys", func(t *testing.T) { testRemovalRevokesKeys(t, open(t)) })
	t.Run("SetupLinkOnce", func(t *testing.T) { testSetupLinkOnce(t, open(t)) })
	t.Run("Sessions", func(t *testing.T) { testSessions(t, open(t)) })
}

func newUser(email string, created time.Time) automation.User {
	return automation.User{ID: automation.NewID(automation.PrefixUser), Email: email, Created: created}
}

func testUsers(t *testing.T, env UsersEnv) {
	ctx, s := context.Background(), env.Users
	u := newUser("ada@example.com", now())
	must(t, "CreateUser", s.CreateUser(ctx, u))
	got, err := s.User(ctx, u.ID)
	must(t, "User", err)
	wantSame(t, "User", got, u)
	got, err = s.UserByEmail(ctx, u.Email)
	must(t, "UserByEmail", err)
	wantSame(t, "UserByEmail", got, u)
	dup := newUser(u.Email, now())
	wantKind(t, "CreateUser with a taken email", s.CreateUser(ctx, dup), automation.ErrConflict, "USER_EXISTS")
	_, err = s.User(ctx, "usr_missing")
	wantKind(t, "User(unknown)", err, automation.ErrNotFound, "")
	_, err = s.UserByEmail(ctx, "nobody@example.com")
	wantKind(t, "UserByEmail(unknown)", err, automation.ErrNotFound, "")

	must(t, "SetPassword", s.SetPassword(ctx, u.ID, "$argon2id$stand-in"))
	must(t, "EndSessions", s.EndSessions(ctx, u.ID))
	must(t, "EndSessions", s.EndSessions(ctx, u.ID))
	got, err = s.User(ctx, u.ID)
	must(t, "User", err)
	if got.PasswordHash != "$argon2id$stand-in" || got.SessionEpoch != 2 {
		t.Errorf("after SetPassword and two EndSessions: hash %q epoch %d, want the hash and 2", got.PasswordHash, got.SessionEpoch)
	}
	wantKind(t, "SetPassword(unknown)", s.SetPassword(ctx, "usr_missing", "x"), automation.ErrNotFound, "")
	wantKind(t, "EndSessions(unknown)", s.EndSessions(ctx, "usr_missing"), automation.ErrNotFound, "")
}

func testMemberships(t *testing.T, env UsersEnv) {
	ctx, s := context.Background(), env.Users
	base := now()
	p1, p2 := newProject("one", base), newProject("two", base)
	must(t, "CreateProject", env.Store.CreateProject(ctx, p1))
	must(t, "CreateProject", env.Store.CreateProject(ctx, p2))
	a, b := newUser("a@example.com", base), newUser("b@example.com", base)
	must(t, "CreateUser", s.CreateUser(ctx, a))
	must(t, "CreateUser", s.CreateUser(ctx, b))
	ma1 := automation.Membership{Project: p1.ID, User: a.ID, Role: automation.RoleAdmin, Created: base}
	mb1 := automation.Membership{Project: p1.ID, User: b.ID, Role: automation.RoleViewer, Created: base.Add(time.Millisecond)}
	ma2 := automation.Membership{Project: p2.ID, User: a.ID, Role: automation.RoleEditor, Created: base.Add(2 * time.Millisecond)}
	for _, m := range []automation.Membership{ma1, mb1, ma2} {
		must(t, "PutMembership", s.PutMembership(ctx, m))
	}
	got, err := s.Membership(ctx, p2.ID, a.ID)
	must(t, "Membership", err)
	wantSame(t, "Membership", got, ma2)
	_, err = s.Membership(ctx, p2.ID, b.ID)
	wantKind(t, "Membership(not a member)", err, automation.ErrNotFound, "")

	// A role change replaces the role and keeps the member's place.
	ma1.Role = automation.RoleOperator
	must(t, "PutMembership (role change)", s.PutMembership(ctx, ma1))
	members, err := s.Members(ctx, p1.ID)
	must(t, "Members", err)
	wantSame(t, "Members", members, []automation.Membership{ma1, mb1})
	mine, err := s.Memberships(ctx, a.ID)
	must(t, "Memberships", err)
	wantSame(t, "Memberships", mine, []automation.Membership{ma1, ma2})
	none, err := s.Memberships(ctx, "usr_missing")
	must(t, "Memberships(unknown)", err)
	if len(none) != 0 {
		t.Errorf("Memberships(unknown) = %v, want none", none)
	}
}

func testRemovalRevokesKeys(t *testing.T, env UsersEnv) {
	ctx, s := context.Background(), env.Users
	base := now()
	p1, p2 := newProject("one", base), newProject("two", base)
	must(t, "CreateProject", env.Store.CreateProject(ctx, p1))
	must(t, "CreateProject", env.Store.CreateProject(ctx, p2))
	a, b := newUser("a@example.com", base), newUser("b@example.com", base)
	must(t, "CreateUser", s.CreateUser(ctx, a))
	must(t, "CreateUser", s.CreateUser(ctx, b))
	for _, m := range []automation.Membership{
		{Project: p1.ID, User: a.ID, Role: automation.RoleEditor, Created: base},
		{Project: p2.ID, User: a.ID, Role: automation.RoleEditor, Created: base},
		{Project: p1.ID, User: b.ID, Role: automation.RoleEditor, Created: base},
	} {
		must(t, "PutMembership", s.PutMembership(ctx, m))
	}
	mine := newKey(p1.ID, base)
	mine.User, mine.Role = a.ID, automation.RoleViewer
	elsewhere := newKey(p2.ID, base)
	elsewhere.User = a.ID
	others := newKey(p1.ID, base)
	others.User = b.ID
	project := newKey(p1.ID, base)
	for _, k := range []automation.APIKey{mine, elsewhere, others, project} {
		must(t, "CreateKey", env.Store.CreateKey(ctx, k))
	}
	got, err := env.Store.KeyByHash(ctx, mine.Hash)
	must(t, "KeyByHash", err)
	equalKey(t, "personal key", got, mine) // User round-trips

	at := base.Add(time.Second)
	must(t, "DeleteMembership", s.DeleteMembership(ctx, p1.ID, a.ID, at))
	_, err = s.Membership(ctx, p1.ID, a.ID)
	wantKind(t, "Membership after removal", err, automation.ErrNotFound, "")
	wantKind(t, "DeleteMembership again", s.DeleteMembership(ctx, p1.ID, a.ID, at), automation.ErrNotFound, "")
	for _, c := range []struct {
		name    string
		k       automation.APIKey
		revoked bool
	}{{"the removed user's key", mine, true}, {"their key in another project", elsewhere, false},
		{"another user's key", others, false}, {"a project key", project, false}} {
		got, err := env.Store.KeyByHash(ctx, c.k.Hash)
		must(t, "KeyByHash "+c.name, err)
		if (got.Revoked != nil) != c.revoked {
			t.Errorf("%s: revoked = %v, want revoked %v", c.name, got.Revoked, c.revoked)
		} else if c.revoked && !got.Revoked.Equal(at) {
			t.Errorf("%s: revoked at %v, want %v", c.name, got.Revoked, at)
		}
	}
}

func testSetupLinkOnce(t *testing.T, env UsersEnv) {
	ctx, s := context.Background(), env.Users
	base := now()
	inv := automation.Invitation{Hash: automation.HashAPIKey("fsu_token"), User: "usr_x", Project: "prj_x",
		Created: base, Expires: base.Add(automation.SetupLinkTTL)}
	must(t, "CreateInvitation", s.CreateInvitation(ctx, inv))
	got, err := s.Invitation(ctx, inv.Hash)
	must(t, "Invitation", err)
	wantSame(t, "Invitation", got, inv)
	_, err = s.Invitation(ctx, automation.HashAPIKey("other"))
	wantKind(t, "Invitation(unknown)", err, automation.ErrNotFound, "")
	wantKind(t, "UseInvitation(unknown)", s.UseInvitation(ctx, automation.HashAPIKey("other"), base), automation.ErrNotFound, "")

	// Of concurrent uses exactly one wins.
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.UseInvitation(ctx, inv.Hash, base.Add(time.Minute))
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, automation.ErrConflict):
			wantKind(t, "a losing use", err, automation.ErrConflict, "SETUP_LINK_USED")
		default:
			t.Errorf("UseInvitation: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent uses of one set-up link succeeded, want exactly 1", won, n)
	}
	got, err = s.Invitation(ctx, inv.Hash)
	must(t, "Invitation after use", err)
	if got.Used == nil || !got.Used.Equal(base.Add(time.Minute)) {
		t.Errorf("Used = %v, want %v", got.Used, base.Add(time.Minute))
	}
	wantKind(t, "UseInvitation after use", s.UseInvitation(ctx, inv.Hash, base), automation.ErrConflict, "SETUP_LINK_USED")
}

func testSessions(t *testing.T, env UsersEnv) {
	ctx, s := context.Background(), env.Users
	base := now()
	u := newUser("s@example.com", base)
	must(t, "CreateUser", s.CreateUser(ctx, u))
	sess := automation.Session{Hash: automation.HashAPIKey("fss_1"), User: u.ID, Epoch: 0, Created: base,
		Expires: base.Add(automation.UserSessionTTL)}
	must(t, "CreateSession", s.CreateSession(ctx, sess))
	got, err := s.Session(ctx, sess.Hash)
	must(t, "Session", err)
	wantSame(t, "Session", got, sess)
	must(t, "DeleteSession", s.DeleteSession(ctx, sess.Hash))
	_, err = s.Session(ctx, sess.Hash)
	wantKind(t, "Session after DeleteSession", err, automation.ErrNotFound, "")
	must(t, "DeleteSession again", s.DeleteSession(ctx, sess.Hash))
}
