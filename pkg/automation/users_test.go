package automation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// fakeClock is a clock the test moves on.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func usersEnv(t *testing.T) (*automation.Service, *fakeClock, automation.Project) {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	fe := flowtest.New(t, flowtest.Options{Clock: clock.now})
	p, err := fe.Svc.CreateProject(context.Background(), "acme", automation.PlanTeam)
	if err != nil {
		t.Fatal(err)
	}
	return fe.Svc, clock, p
}

func wantUserErr(t *testing.T, what string, err error, kind error, code string) {
	t.Helper()
	var e *automation.Error
	if !errors.Is(err, kind) || !errors.As(err, &e) || (code != "" && e.Code != code) {
		t.Fatalf("%s: err = %v, want %v with code %q", what, err, kind, code)
	}
}

const goodPassword = "correct horse battery"

// invite makes a member with a password and returns their ID.
func invite(t *testing.T, svc *automation.Service, p automation.Project, email string, role automation.Role) string {
	t.Helper()
	ctx := context.Background()
	inv, err := svc.InviteUser(ctx, p.ID, email, role)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AcceptInvitation(ctx, inv.SetupToken, goodPassword); err != nil {
		t.Fatal(err)
	}
	return inv.Member.ID
}

func TestInvitationSetupLinkOnce(t *testing.T) {
	svc, clock, p := usersEnv(t)
	ctx := context.Background()
	inv, err := svc.InviteUser(ctx, p.ID, "  Ada@Example.COM ", automation.RoleEditor)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Member.Email != "ada@example.com" || inv.Member.Status != "invited" || inv.Member.Role != automation.RoleEditor {
		t.Fatalf("invited member = %+v", inv.Member)
	}
	if !strings.HasPrefix(inv.SetupToken, automation.PrefixSetupToken) || len(inv.SetupToken) < 4+52 {
		t.Fatalf("set-up token %q: want fsu_ and 256 random bits", inv.SetupToken)
	}
	if want := clock.now().Add(7 * 24 * time.Hour); !inv.Expires.Equal(want) {
		t.Fatalf("expires %v, want %v", inv.Expires, want)
	}
	_, err = svc.InviteUser(ctx, p.ID, "ada@example.com", automation.RoleViewer)
	wantUserErr(t, "second invitation of a member", err, automation.ErrConflict, "USER_EXISTS")
	_, err = svc.InviteUser(ctx, p.ID, "not an email", automation.RoleViewer)
	wantUserErr(t, "bad email", err, automation.ErrInvalid, "VALIDATION_ERROR")
	_, err = svc.InviteUser(ctx, p.ID, "bob@example.com", "owner")
	wantUserErr(t, "bad role", err, automation.ErrInvalid, "VALIDATION_ERROR")

	_, err = svc.AcceptInvitation(ctx, inv.SetupToken, "short")
	wantUserErr(t, "short password", err, automation.ErrInvalid, "PASSWORD_TOO_SHORT")
	// A refused password leaves the link usable.
	u, err := svc.AcceptInvitation(ctx, inv.SetupToken, goodPassword)
	if err != nil {
		t.Fatal(err)
	}
	if u.PasswordHash == "" || strings.Contains(u.PasswordHash, goodPassword) {
		t.Fatalf("password stored as %q", u.PasswordHash)
	}
	_, err = svc.AcceptInvitation(ctx, inv.SetupToken, goodPassword)
	wantUserErr(t, "second use of the link", err, automation.ErrInvalid, "SETUP_LINK_INVALID")

	late, err := svc.InviteUser(ctx, p.ID, "late@example.com", automation.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	clock.add(automation.SetupLinkTTL)
	_, err = svc.AcceptInvitation(ctx, late.SetupToken, goodPassword)
	wantUserErr(t, "expired link", err, automation.ErrInvalid, "SETUP_LINK_INVALID")
}

func TestSessionsEndOnSignOutRoleChangeAndRemoval(t *testing.T) {
	svc, clock, p := usersEnv(t)
	ctx := context.Background()
	id := invite(t, svc, p, "ada@example.com", automation.RoleEditor)

	token, pr, err := svc.PasswordSignIn(ctx, "ADA@example.com", goodPassword, "r1", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if pr.UserID != id || pr.Role != automation.RoleEditor || pr.Project.ID != p.ID || pr.Email != "ada@example.com" {
		t.Fatalf("principal %+v", pr)
	}
	if _, err := svc.SessionPrincipal(ctx, token, p.ID); err != nil {
		t.Fatal(err)
	}
	// Sign-out ends that session only.
	other, _, err := svc.PasswordSignIn(ctx, "ada@example.com", goodPassword, "r2", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.SignOut(ctx, token); err != nil {
		t.Fatal(err)
	}
	_, err = svc.SessionPrincipal(ctx, token, p.ID)
	wantUserErr(t, "signed-out session", err, automation.ErrUnauthorized, "")
	if _, err := svc.SessionPrincipal(ctx, other, p.ID); err != nil {
		t.Fatalf("the other session ended with the first: %v", err)
	}

	// A personal key: at most the user's role.
	userPr, _ := svc.SessionPrincipal(ctx, other, p.ID)
	_, _, err = svc.CreatePersonalKey(ctx, userPr, automation.RoleAdmin)
	wantUserErr(t, "personal key above the user's role", err, automation.ErrForbidden, "ROLE_ABOVE_YOURS")
	key, k, err := svc.CreatePersonalKey(ctx, userPr, "")
	if err != nil {
		t.Fatal(err)
	}
	if k.Role != automation.RoleEditor || k.User != id {
		t.Fatalf("personal key %+v", k)
	}

	// A role change ends the sessions, and caps the key from the next request.
	if _, err := svc.SetUserRole(ctx, p.ID, id, automation.RoleViewer); err != nil {
		t.Fatal(err)
	}
	_, err = svc.SessionPrincipal(ctx, other, p.ID)
	wantUserErr(t, "session after a role change", err, automation.ErrUnauthorized, "")
	kp, err := svc.AuthenticatePrincipal(ctx, key)
	if err != nil || kp.Role != automation.RoleViewer {
		t.Fatalf("personal key after demotion: role %q err %v, want viewer", kp.Role, err)
	}
	token, pr, err = svc.PasswordSignIn(ctx, "ada@example.com", goodPassword, "r3", "192.0.2.1")
	if err != nil || pr.Role != automation.RoleViewer {
		t.Fatalf("sign-in after demotion: %+v %v", pr, err)
	}

	// Removal ends the session and the key at once.
	if err := svc.RemoveUser(ctx, p.ID, id); err != nil {
		t.Fatal(err)
	}
	_, err = svc.SessionPrincipal(ctx, token, p.ID)
	wantUserErr(t, "session after removal", err, automation.ErrUnauthorized, "")
	_, err = svc.AuthenticatePrincipal(ctx, key)
	wantUserErr(t, "personal key after removal", err, automation.ErrUnauthorized, "")
	keys, err := svc.APIKeys(ctx, p.ID)
	if err != nil || len(keys) != 1 || keys[0].Revoked == nil {
		t.Fatalf("keys after removal: %+v %v, want the personal key revoked", keys, err)
	}
	_, _, err = svc.PasswordSignIn(ctx, "ada@example.com", goodPassword, "r4", "192.0.2.1")
	wantUserErr(t, "sign-in of a removed person", err, automation.ErrUnauthorized, "")
	_, err = svc.ProjectUser(ctx, p.ID, id)
	wantUserErr(t, "removed user", err, automation.ErrNotFound, "USER_NOT_FOUND")

	// Sessions expire.
	id2 := invite(t, svc, p, "bob@example.com", automation.RoleViewer)
	token, _, err = svc.PasswordSignIn(ctx, "bob@example.com", goodPassword, "r5", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	clock.add(automation.UserSessionTTL)
	_, err = svc.SessionPrincipal(ctx, token, p.ID)
	wantUserErr(t, "expired session of "+id2, err, automation.ErrUnauthorized, "")
}

func TestPasswordSigninSlowsRepeatedFailures(t *testing.T) {
	svc, clock, p := usersEnv(t)
	ctx := context.Background()
	invite(t, svc, p, "ada@example.com", automation.RoleViewer)
	for i := range automation.SigninFailuresPerEmail {
		_, _, err := svc.PasswordSignIn(ctx, "ada@example.com", "wrong password!", "r", "192.0.2.1")
		wantUserErr(t, "wrong password", err, automation.ErrUnauthorized, "")
		_ = i
	}
	// Now even the right password waits for the window to end.
	_, _, err := svc.PasswordSignIn(ctx, "ada@example.com", goodPassword, "r", "192.0.2.9")
	wantUserErr(t, "sign-in while slowed", err, automation.ErrRateLimited, "TOO_MANY_SIGNIN_ATTEMPTS")
	var rl *automation.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter <= 0 || rl.RetryAfter > automation.SigninFailureWindow {
		t.Fatalf("RetryAfter of %v: want within the window", err)
	}
	clock.add(automation.SigninFailureWindow)
	if _, _, err := svc.PasswordSignIn(ctx, "ada@example.com", goodPassword, "r", "192.0.2.9"); err != nil {
		t.Fatalf("sign-in after the window: %v", err)
	}

	// Per source address: failures over many emails from one address.
	for i := range automation.SigninFailuresPerAddress {
		_, _, err := svc.PasswordSignIn(ctx, "guess"+string(rune('a'+i))+"@example.com", "wrong password!", "r", "198.51.100.7")
		wantUserErr(t, "unknown email", err, automation.ErrUnauthorized, "")
	}
	_, _, err = svc.PasswordSignIn(ctx, "ada@example.com", goodPassword, "r", "198.51.100.7")
	wantUserErr(t, "sign-in from a slowed address", err, automation.ErrRateLimited, "TOO_MANY_SIGNIN_ATTEMPTS")
	if _, _, err := svc.PasswordSignIn(ctx, "ada@example.com", goodPassword, "r", "192.0.2.9"); err != nil {
		t.Fatalf("the same email from another address: %v", err)
	}
}

func TestAuditActorShapes(t *testing.T) {
	svc, _, p := usersEnv(t)
	ctx := context.Background()
	invite(t, svc, p, "ada@example.com", automation.RoleEditor)
	if _, _, err := svc.PasswordSignIn(ctx, "ada@example.com", goodPassword, "r1", "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PasswordSignIn(ctx, "ada@example.com", "wrong password!", "r2", "192.0.2.1"); err == nil {
		t.Fatal("wrong password signed in")
	}
	log, err := svc.AuditLog(ctx, p, automation.AuditSearch{})
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Data) != 2 {
		t.Fatalf("audit log has %d entries, want the sign-in and the failure", len(log.Data))
	}
	b, _ := json.Marshal(log.Data[1].Actor)
	if got := string(b); !strings.HasPrefix(got, `{"userId":"usr_`) || !strings.HasSuffix(got, `","email":"ada@example.com","role":"editor"}`) {
		t.Errorf("a person's actor = %s", got)
	}
	if log.Data[0].Action != "session.signin_failed" || log.Data[1].Action != "session.signin" {
		t.Errorf("actions %s, %s", log.Data[0].Action, log.Data[1].Action)
	}
	// A key's actor keeps the shape every stored entry has.
	b, _ = json.Marshal(automation.AuditActor{KeyID: "key_1", Role: automation.RoleViewer})
	if string(b) != `{"keyId":"key_1","role":"viewer"}` {
		t.Errorf("a key's actor = %s", b)
	}
	var old automation.AuditActor
	if err := json.Unmarshal([]byte(`{"keyId":"key_1","role":"admin"}`), &old); err != nil || old.KeyID != "key_1" || old.Role != automation.RoleAdmin {
		t.Errorf("an entry stored before people: %+v %v", old, err)
	}
}

// countingHasher counts the argon2id work a Service asks for.
type countingHasher struct {
	automation.PasswordHasher
	mu     sync.Mutex
	hashes int
	checks int
}

func (h *countingHasher) HashPassword(pw string) (string, error) {
	h.mu.Lock()
	h.hashes++
	h.mu.Unlock()
	return h.PasswordHasher.HashPassword(pw)
}

func (h *countingHasher) CheckPassword(hash, pw string) (bool, error) {
	h.mu.Lock()
	h.checks++
	h.mu.Unlock()
	return h.PasswordHasher.CheckPassword(hash, pw)
}

func (h *countingHasher) work() int { h.mu.Lock(); defer h.mu.Unlock(); return h.hashes + h.checks }

// TestSigninCostsTheSameForUnknownEmail: building the Service hashes
// nothing (a hash at start was most of every Lambda function's cold
// start), and a sign-in with an unknown email does the same argon2id work
// as one with a wrong password: one hash, so its time tells nothing.
func TestSigninCostsTheSameForUnknownEmail(t *testing.T) {
	h := &countingHasher{PasswordHasher: flowtest.TestPasswords}
	fe := flowtest.New(t, flowtest.Options{Passwords: h})
	if n := h.work(); n != 0 {
		t.Fatalf("building the Service hashed %d times, want 0", n)
	}
	ctx := context.Background()
	p, err := fe.Svc.CreateProject(ctx, "acme", automation.PlanTeam)
	if err != nil {
		t.Fatal(err)
	}
	invite(t, fe.Svc, p, "ada@example.com", automation.RoleViewer)
	for _, email := range []string{"ada@example.com", "nobody@example.com"} {
		before := h.work()
		_, _, err := fe.Svc.PasswordSignIn(ctx, email, "wrong password!", "r", "192.0.2.1")
		wantUserErr(t, email, err, automation.ErrUnauthorized, "")
		if n := h.work() - before; n != 1 {
			t.Errorf("a failed sign-in as %s did %d hashes or checks, want 1", email, n)
		}
	}
}
