package automation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/mail"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// ID prefixes of people.
const (
	PrefixUser = "usr_"
	// PrefixSetupToken starts a set-up link's token, PrefixSessionToken a
	// dashboard session's: a token is recognisable in a log or a paste.
	PrefixSetupToken   = "fsu_"
	PrefixSessionToken = "fss_"
)

// Bounds of people (docs/reliability.md).
const (
	// SetupLinkTTL is how long an invitation's set-up link works.
	SetupLinkTTL = 7 * 24 * time.Hour
	// MinPasswordLength and MaxPasswordLength bound a password, in
	// characters: the lower for strength, the upper so that hashing a
	// sign-in attempt costs a bounded amount.
	MinPasswordLength = 12
	MaxPasswordLength = 256
	// MaxEmailLength is RFC 5321's limit on a forward path.
	MaxEmailLength = 254
)

// User is a person who signs in to the dashboard. A user belongs to
// projects through memberships, with a role in each.
type User struct {
	ID    string `json:"id"`
	Email string `json:"email"` // lower-case
	// PasswordHash is the PasswordHasher's encoding; "" until the user
	// sets a password through a set-up link (or forever, for a user who
	// signs in with OpenID Connect only).
	PasswordHash string    `json:"-"`
	Created      time.Time `json:"created"`
	// SessionEpoch ends sessions: every session carries the epoch it was
	// made in, and UserStore.EndSessions moves the user's on.
	SessionEpoch int64 `json:"-"`
}

// Membership is a user's role in one project.
type Membership struct {
	Project string    `json:"project"`
	User    string    `json:"userId"`
	Role    Role      `json:"role"`
	Created time.Time `json:"created"`
}

// Invitation is a one-time set-up link: the token is 256 random bits,
// shown once in the invitation's answer and stored as its SHA-256 hash.
type Invitation struct {
	Hash    string
	User    string
	Project string
	Created time.Time
	Expires time.Time
	Used    *time.Time
}

// Session is a signed-in person in the dashboard, stored by the hash of
// its 256-bit token. It is not tied to one project: the request names the
// project, and the membership decides the role on every request.
type Session struct {
	Hash    string
	User    string
	Epoch   int64 // the user's SessionEpoch when it was made
	Created time.Time
	Expires time.Time
}

// Member is a user as a project's administrator sees it.
type Member struct {
	ID      string    `json:"id"`
	Email   string    `json:"email"`
	Role    Role      `json:"role"`
	Status  string    `json:"status"` // "invited" (no password yet) or "active"
	Created time.Time `json:"created"`
}

// MarshalJSON writes the time in TimeFormat, as every timestamp.
func (m Member) MarshalJSON() ([]byte, error) {
	type plain Member
	return json.Marshal(struct {
		plain
		Created stamp `json:"created"`
	}{plain(m), stamp(m.Created)})
}

// Invited is the answer to an invitation: the member and the set-up link's
// token, shown once.
type Invited struct {
	Member     Member
	SetupToken string
	Expires    time.Time
}

// ProjectRole is one project a user may switch to.
type ProjectRole struct {
	Project Project
	Role    Role
}

// UserService holds people: users, their memberships, invitations,
// password sign-in and sessions, and personal API keys (users.go,
// signinthrottle.go). Without a UserStore (Config.Users) every operation
// is a 501 USERS_NOT_AVAILABLE and only API keys sign in.
type UserService struct {
	*base
	store     UserStore      // nil: no people on this backend
	passwords PasswordHasher // nil: no password sign-in
	keys      userKeyPorts
	throttle  *signinThrottle
}

// userKeyPorts is the part of Store a UserService uses: projects to name,
// keys to make and list personal ones, audit for sign-ins.
type userKeyPorts interface {
	ProjectStore
	KeyStore
	AuditStore
}

func newUserService(b *base, cfg Config) *UserService {
	return &UserService{base: b, store: cfg.Users, passwords: cfg.Passwords, keys: cfg.Store,
		throttle: newSigninThrottle(b.now)}
}

func usersUnavailable() *Error {
	return &Error{Kind: ErrNotImplemented, Code: "USERS_NOT_AVAILABLE",
		Message: "user accounts are not available on this backend; sign in with an API key"}
}

func (s *UserService) ready() error {
	if s.store == nil {
		return usersUnavailable()
	}
	return nil
}

// normalizeEmail checks an address and returns it lower-cased: emails
// match case-insensitively (OpenID providers and people vary the case).
func normalizeEmail(field, email string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(email))
	if e == "" {
		return "", Invalid("%s is required", field)
	}
	if len(e) > MaxEmailLength {
		return "", Invalid("%s is longer than %d characters", field, MaxEmailLength)
	}
	a, err := mail.ParseAddress(e)
	if err != nil || a.Address != e || a.Name != "" || !strings.Contains(e[strings.LastIndexByte(e, '@')+1:], ".") {
		return "", Invalid("%s %q is not an email address such as ada@example.com", field, ClipID(e))
	}
	return e, nil
}

// roleRank orders roles: 0 is the most powerful; an unknown role ranks
// below every known one.
func roleRank(r Role) int {
	if i := slices.Index(Roles, r); i >= 0 {
		return i
	}
	return len(Roles)
}

// lesserRole returns the less powerful of two roles.
func lesserRole(a, b Role) Role {
	if roleRank(a) >= roleRank(b) {
		return a
	}
	return b
}

// hashToken is the stored form of a set-up or session token.
func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// InviteUser adds a person to the project with a role and returns a set-up
// link's token, valid SetupLinkTTL and usable once. A person who exists
// already (a member of another project) gets the membership and a link
// too; one already a member of this project is a 409 USER_EXISTS.
func (s *UserService) InviteUser(ctx context.Context, project, email string, role Role) (Invited, error) {
	if err := s.ready(); err != nil {
		return Invited{}, err
	}
	e, err := normalizeEmail("email", email)
	if err != nil {
		return Invited{}, err
	}
	if role == "" {
		return Invited{}, Invalid("role is required: allowed values are %s", join(Roles))
	}
	r, err := ParseRole("role", string(role))
	if err != nil {
		return Invited{}, err
	}
	now := s.clock()
	u, err := s.store.UserByEmail(ctx, e)
	switch {
	case errors.Is(err, ErrNotFound):
		u = User{ID: s.newID(PrefixUser), Email: e, Created: now}
		if err := s.store.CreateUser(ctx, u); err != nil {
			return Invited{}, wrap("invite user", err)
		}
	case err != nil:
		return Invited{}, wrap("invite user", err)
	default:
		if _, err := s.store.Membership(ctx, project, u.ID); err == nil {
			return Invited{}, Conflict("USER_EXISTS", "%s is a member of this project already", e)
		} else if !errors.Is(err, ErrNotFound) {
			return Invited{}, wrap("invite user", err)
		}
	}
	auditCreated(ctx, u.ID)
	m := Membership{Project: project, User: u.ID, Role: r, Created: now}
	if err := s.store.PutMembership(ctx, m); err != nil {
		return Invited{}, wrap("invite user", err)
	}
	token := PrefixSetupToken + randomToken(32)
	inv := Invitation{Hash: hashToken(token), User: u.ID, Project: project, Created: now, Expires: now.Add(SetupLinkTTL)}
	if err := s.store.CreateInvitation(ctx, inv); err != nil {
		return Invited{}, wrap("invite user", err)
	}
	return Invited{Member: memberOf(u, m), SetupToken: token, Expires: inv.Expires}, nil
}

func memberOf(u User, m Membership) Member {
	status := "active"
	if u.PasswordHash == "" {
		status = "invited"
	}
	return Member{ID: u.ID, Email: u.Email, Role: m.Role, Status: status, Created: m.Created}
}

// Users lists the project's members, oldest first.
func (s *UserService) Users(ctx context.Context, project string) ([]Member, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	ms, err := s.store.Members(ctx, project)
	if err != nil {
		return nil, wrap("list users", err)
	}
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		u, err := s.store.User(ctx, m.User)
		if errors.Is(err, ErrNotFound) {
			continue
		} else if err != nil {
			return nil, wrap("list users", err)
		}
		out = append(out, memberOf(u, m))
	}
	return out, nil
}

// ProjectUser returns one member of the project; a user who is not a
// member (or another project's) is a 404 USER_NOT_FOUND.
func (s *UserService) ProjectUser(ctx context.Context, project, id string) (Member, error) {
	if err := s.ready(); err != nil {
		return Member{}, err
	}
	u, m, err := s.member(ctx, project, id)
	if err != nil {
		return Member{}, err
	}
	return memberOf(u, m), nil
}

func (s *UserService) member(ctx context.Context, project, id string) (User, Membership, error) {
	m, err := s.store.Membership(ctx, project, id)
	if errors.Is(err, ErrNotFound) {
		return User{}, Membership{}, NotFound("user", id)
	} else if err != nil {
		return User{}, Membership{}, wrap("read user", err)
	}
	u, err := s.store.User(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return User{}, Membership{}, NotFound("user", id)
	} else if err != nil {
		return User{}, Membership{}, wrap("read user", err)
	}
	return u, m, nil
}

// SetUserRole changes a member's role. The change holds from the next
// request (the role is read on every one) and ends the user's sessions,
// so that a page shown with the old role cannot post a form.
func (s *UserService) SetUserRole(ctx context.Context, project, id string, role Role) (Member, error) {
	if err := s.ready(); err != nil {
		return Member{}, err
	}
	if role == "" {
		return Member{}, Invalid("role is required: allowed values are %s", join(Roles))
	}
	r, err := ParseRole("role", string(role))
	if err != nil {
		return Member{}, err
	}
	u, m, err := s.member(ctx, project, id)
	if err != nil {
		return Member{}, err
	}
	m.Role = r
	if err := s.store.PutMembership(ctx, m); err != nil {
		return Member{}, wrap("set user role", err)
	}
	if err := s.store.EndSessions(ctx, id); err != nil {
		return Member{}, wrap("set user role", err)
	}
	return memberOf(u, m), nil
}

// RemoveUser removes a member from the project: the membership goes and
// the user's personal keys in the project are revoked in the same write,
// and the user's sessions end. The user record stays (the audit log names
// it, and other projects may have the person).
func (s *UserService) RemoveUser(ctx context.Context, project, id string) error {
	if err := s.ready(); err != nil {
		return err
	}
	if _, _, err := s.member(ctx, project, id); err != nil {
		return err
	}
	err := s.store.DeleteMembership(ctx, project, id, s.clock())
	if errors.Is(err, ErrNotFound) {
		return NotFound("user", id)
	} else if err != nil {
		return wrap("remove user", err)
	}
	return wrap("remove user", s.store.EndSessions(ctx, id))
}

// SetupLink describes an unused, unexpired set-up link for its page.
type SetupLink struct {
	Email       string
	Project     Project
	HasPassword bool // the person has a password already: the link only confirms
}

// setupLink finds a usable set-up link by its token.
func (s *UserService) setupLink(ctx context.Context, token string) (Invitation, User, error) {
	bad := InvalidCode("SETUP_LINK_INVALID", "this set-up link is not valid: it may have expired (links last 7 days) or been used; ask an admin for a new one")
	if !strings.HasPrefix(token, PrefixSetupToken) || len(token) > 128 {
		return Invitation{}, User{}, bad
	}
	inv, err := s.store.Invitation(ctx, hashToken(token))
	if errors.Is(err, ErrNotFound) {
		return Invitation{}, User{}, bad
	} else if err != nil {
		return Invitation{}, User{}, wrap("read set-up link", err)
	}
	if inv.Used != nil || !s.clock().Before(inv.Expires) {
		return Invitation{}, User{}, bad
	}
	u, err := s.store.User(ctx, inv.User)
	if errors.Is(err, ErrNotFound) {
		return Invitation{}, User{}, bad
	} else if err != nil {
		return Invitation{}, User{}, wrap("read set-up link", err)
	}
	return inv, u, nil
}

// SetupLinkInfo checks a set-up link for its page, without using it.
func (s *UserService) SetupLinkInfo(ctx context.Context, token string) (SetupLink, error) {
	if err := s.ready(); err != nil {
		return SetupLink{}, err
	}
	inv, u, err := s.setupLink(ctx, token)
	if err != nil {
		return SetupLink{}, err
	}
	p, err := s.keys.Project(ctx, inv.Project)
	if err != nil {
		return SetupLink{}, wrap("read set-up link", err)
	}
	return SetupLink{Email: u.Email, Project: p, HasPassword: u.PasswordHash != ""}, nil
}

// CheckPasswordRule refuses a password outside the length rule.
func CheckPasswordRule(pw string) error {
	n := utf8.RuneCountInString(pw)
	if n < MinPasswordLength {
		return InvalidCode("PASSWORD_TOO_SHORT", "the password has %d characters; use at least %d", n, MinPasswordLength)
	}
	if n > MaxPasswordLength {
		return InvalidCode("PASSWORD_TOO_LONG", "the password has more than %d characters", MaxPasswordLength)
	}
	return nil
}

// AcceptInvitation uses a set-up link once: it sets the person's password
// (required unless they have one already) and returns the user. A second
// use of the same link is refused (409 SETUP_LINK_USED, or the 400 of an
// invalid link once the first use is stored).
func (s *UserService) AcceptInvitation(ctx context.Context, token, password string) (User, error) {
	if err := s.ready(); err != nil {
		return User{}, err
	}
	inv, u, err := s.setupLink(ctx, token)
	if err != nil {
		return User{}, err
	}
	var hash string
	if password != "" || u.PasswordHash == "" {
		if s.passwords == nil {
			return User{}, &Error{Kind: ErrNotImplemented, Code: "PASSWORDS_NOT_AVAILABLE", Message: "password sign-in is not available here"}
		}
		if err := CheckPasswordRule(password); err != nil {
			return User{}, err
		}
		if hash, err = s.passwords.HashPassword(password); err != nil {
			return User{}, wrap("set password", err)
		}
	}
	// Use the link before setting the password: of two concurrent uses
	// only the one that used it sets anything.
	if err := s.store.UseInvitation(ctx, inv.Hash, s.clock()); err != nil {
		return User{}, wrap("use set-up link", err)
	}
	if hash != "" {
		if err := s.store.SetPassword(ctx, u.ID, hash); err != nil {
			return User{}, wrap("set password", err)
		}
		u.PasswordHash = hash
		// A new password ends the sessions made with the old one.
		if err := s.store.EndSessions(ctx, u.ID); err != nil {
			return User{}, wrap("set password", err)
		}
		u.SessionEpoch++
	}
	return u, nil
}

// UserProjects lists the projects a user may switch to, oldest membership
// first.
func (s *UserService) UserProjects(ctx context.Context, userID string) ([]ProjectRole, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	ms, err := s.store.Memberships(ctx, userID)
	if err != nil {
		return nil, wrap("list projects", err)
	}
	out := make([]ProjectRole, 0, len(ms))
	for _, m := range ms {
		p, err := s.keys.Project(ctx, m.Project)
		if errors.Is(err, ErrNotFound) {
			continue
		} else if err != nil {
			return nil, wrap("list projects", err)
		}
		out = append(out, ProjectRole{Project: p, Role: m.Role})
	}
	return out, nil
}
