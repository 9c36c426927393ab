package automation

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// UserSessionTTL is how long a person's dashboard session lasts.
const UserSessionTTL = 12 * time.Hour

func deniedSession() *Error {
	return Unauthorized("UNAUTHORIZED", "your session has ended: sign in again")
}

func deniedPassword() *Error {
	return Unauthorized("UNAUTHORIZED", "that email and password do not match")
}

// PasswordSignIn checks an email and password and starts a session,
// returning its token (shown once; only its hash is stored). Failures are
// counted per email and per source address (signinThrottle) and recorded
// in the audit log as session.signin_failed: in the person's first project
// when the email is known, with no project otherwise.
func (s *UserService) PasswordSignIn(ctx context.Context, email, password, requestID, sourceIP string) (string, Principal, error) {
	if err := s.ready(); err != nil {
		return "", Principal{}, err
	}
	if s.passwords == nil {
		return "", Principal{}, &Error{Kind: ErrNotImplemented, Code: "PASSWORDS_NOT_AVAILABLE", Message: "password sign-in is not available here"}
	}
	e := strings.ToLower(strings.TrimSpace(email))
	if e == "" || len(e) > MaxEmailLength {
		return "", Principal{}, Invalid("email is required (at most %d characters)", MaxEmailLength)
	}
	if wait := s.throttle.wait(e, sourceIP); wait > 0 {
		secs := int(math.Ceil(wait.Seconds()))
		return "", Principal{}, &RateLimited{RetryAfter: wait, Err: &Error{Kind: ErrRateLimited, Code: "TOO_MANY_SIGNIN_ATTEMPTS",
			Message: fmt.Sprintf("too many failed sign-ins for this email or from this address: try again in %d seconds", secs)}}
	}
	if len(password) > 4*MaxPasswordLength {
		password = password[:4*MaxPasswordLength] // hashing cost stays bounded; it cannot match anyway
	}
	u, err := s.store.UserByEmail(ctx, e)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return "", Principal{}, wrap("sign in", err)
	}
	ok := false
	if err == nil && u.PasswordHash != "" {
		if ok, err = s.passwords.CheckPassword(u.PasswordHash, password); err != nil {
			return "", Principal{}, wrap("sign in", err)
		}
	} else {
		// An unknown email costs what a wrong password does (no
		// enumeration by timing): hashing the password is the same work
		// as checking it. Not a dummy hash made at start: that was one
		// argon2id hash (19 MiB) in every cold start of every function,
		// about 70 % of a Lambda bootstrap's start-up (docs/aws.md).
		_, _ = s.passwords.HashPassword(password)
	}
	var pr Principal
	if u.ID != "" {
		pr, err = s.principal(ctx, u, "")
		if err != nil && !errors.Is(err, ErrUnauthorized) {
			return "", Principal{}, err
		}
		if err != nil {
			ok = false // a person in no project cannot sign in
			pr = Principal{UserID: u.ID, Email: u.Email}
		}
	} else {
		pr = Principal{Email: e}
	}
	if !ok {
		s.throttle.fail(e, sourceIP)
		if aerr := s.recordSignin(ctx, pr, "session.signin_failed", requestID, sourceIP); aerr != nil {
			return "", Principal{}, aerr
		}
		return "", Principal{}, deniedPassword()
	}
	s.throttle.succeed(e)
	token, err := s.startSession(ctx, u)
	if err != nil {
		return "", Principal{}, err
	}
	if aerr := s.recordSignin(ctx, pr, "session.signin", requestID, sourceIP); aerr != nil {
		return "", Principal{}, aerr
	}
	return token, pr, nil
}

// StartSession starts a session for a user another way has authenticated
// (OpenID Connect) and records the sign-in; the user must be a member of a
// project.
func (s *UserService) StartSession(ctx context.Context, userID, requestID, sourceIP string) (string, Principal, error) {
	if err := s.ready(); err != nil {
		return "", Principal{}, err
	}
	u, err := s.store.User(ctx, userID)
	if errors.Is(err, ErrNotFound) {
		return "", Principal{}, deniedSession()
	} else if err != nil {
		return "", Principal{}, wrap("sign in", err)
	}
	pr, err := s.principal(ctx, u, "")
	if err != nil {
		return "", Principal{}, err
	}
	token, err := s.startSession(ctx, u)
	if err != nil {
		return "", Principal{}, err
	}
	return token, pr, s.recordSignin(ctx, pr, "session.signin", requestID, sourceIP)
}

func (s *UserService) startSession(ctx context.Context, u User) (string, error) {
	token := PrefixSessionToken + randomToken(32)
	now := s.clock()
	sess := Session{Hash: hashToken(token), User: u.ID, Epoch: u.SessionEpoch, Created: now, Expires: now.Add(UserSessionTTL)}
	if err := s.store.CreateSession(ctx, sess); err != nil {
		return "", wrap("start session", err)
	}
	return token, nil
}

func (s *UserService) recordSignin(ctx context.Context, pr Principal, action, requestID, sourceIP string) error {
	e := s.newAuditEntry(pr, action, AuditResource{Type: "session", ID: pr.UserID}, requestID, sourceIP)
	return wrap("record audit entry", s.keys.AppendAudit(ctx, e))
}

// SessionPrincipal checks a session token on every request and returns who
// it is in the project asked for (its ID; "" or a project the person has
// left: their first project). The role is the membership's as stored now,
// so a role change holds from the next request; a session made before the
// user's sessions were ended (sign-out elsewhere, role change, removal,
// new password) is a 401, as is a person in no project.
func (s *UserService) SessionPrincipal(ctx context.Context, token, project string) (Principal, error) {
	if err := s.ready(); err != nil {
		return Principal{}, err
	}
	if !strings.HasPrefix(token, PrefixSessionToken) || len(token) > 128 {
		return Principal{}, deniedSession()
	}
	sess, err := s.store.Session(ctx, hashToken(token))
	if errors.Is(err, ErrNotFound) {
		return Principal{}, deniedSession()
	} else if err != nil {
		return Principal{}, wrap("read session", err)
	}
	if !s.clock().Before(sess.Expires) {
		return Principal{}, deniedSession()
	}
	u, err := s.store.User(ctx, sess.User)
	if errors.Is(err, ErrNotFound) {
		return Principal{}, deniedSession()
	} else if err != nil {
		return Principal{}, wrap("read session", err)
	}
	if u.SessionEpoch != sess.Epoch {
		return Principal{}, deniedSession()
	}
	return s.principal(ctx, u, project)
}

// principal is the user in a project: the one asked for when a member of
// it, else the first project of their memberships.
func (s *UserService) principal(ctx context.Context, u User, project string) (Principal, error) {
	var m Membership
	var err error
	if project != "" {
		m, err = s.store.Membership(ctx, project, u.ID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Principal{}, wrap("read membership", err)
		}
	}
	if project == "" || err != nil {
		ms, err := s.store.Memberships(ctx, u.ID)
		if err != nil {
			return Principal{}, wrap("read memberships", err)
		}
		if len(ms) == 0 {
			return Principal{}, Unauthorized("UNAUTHORIZED", "%s is not a member of any project: ask an admin to invite you", u.Email)
		}
		m = ms[0]
	}
	p, err := s.keys.Project(ctx, m.Project)
	if errors.Is(err, ErrNotFound) {
		return Principal{}, deniedSession()
	} else if err != nil {
		return Principal{}, wrap("read project", err)
	}
	return Principal{Project: p, Role: m.Role, UserID: u.ID, Email: u.Email}, nil
}

// SignOut ends a session; an unknown token is not an error.
func (s *UserService) SignOut(ctx context.Context, token string) error {
	if err := s.ready(); err != nil {
		return err
	}
	if !strings.HasPrefix(token, PrefixSessionToken) || len(token) > 128 {
		return nil
	}
	return wrap("sign out", s.store.DeleteSession(ctx, hashToken(token)))
}

func notAPerson() *Error {
	return Forbidden("PERSONAL_KEYS_NEED_A_PERSON", "personal API keys belong to people: sign in to the dashboard with your email to make one")
}

// CreatePersonalKey makes an API key of the signed-in person in their
// current project, with a role at most their own ("" is their own). The
// key is returned once. It works while the person is a member, with at
// most the role they have then (ProjectService.keyByHash), and is revoked
// when they are removed.
func (s *UserService) CreatePersonalKey(ctx context.Context, pr Principal, role Role) (string, APIKey, error) {
	if err := s.ready(); err != nil {
		return "", APIKey{}, err
	}
	if pr.UserID == "" {
		return "", APIKey{}, notAPerson()
	}
	r := pr.Role
	if role != "" {
		var err error
		if r, err = ParseRole("role", string(role)); err != nil {
			return "", APIKey{}, err
		}
	}
	if roleRank(r) < roleRank(pr.Role) {
		return "", APIKey{}, Forbidden("ROLE_ABOVE_YOURS", "a personal key may have at most your role (%s), not %s", pr.Role, r)
	}
	secret := newAPIKey()
	k := APIKey{ID: s.newID(PrefixKey), Project: pr.Project.ID, Hash: HashAPIKey(secret),
		Prefix: secret[:len(PrefixAPIKey)+6], Created: s.clock(), Role: r, User: pr.UserID}
	if err := s.keys.CreateKey(ctx, k); err != nil {
		return "", APIKey{}, wrap("create key", err)
	}
	auditCreated(ctx, k.ID)
	if err := s.auditAfter(ctx); err != nil {
		return "", APIKey{}, err
	}
	return secret, k, nil
}

// PersonalKeys lists the signed-in person's keys in their current project.
func (s *UserService) PersonalKeys(ctx context.Context, pr Principal) ([]APIKey, error) {
	if pr.UserID == "" {
		return nil, notAPerson()
	}
	ks, err := s.keys.Keys(ctx, pr.Project.ID)
	if err != nil {
		return nil, wrap("list keys", err)
	}
	var out []APIKey
	for _, k := range ks {
		if k.User == pr.UserID {
			out = append(out, k)
		}
	}
	return out, nil
}

// RevokePersonalKey revokes one of the signed-in person's keys; another's
// key is a 404, as if it did not exist.
func (s *UserService) RevokePersonalKey(ctx context.Context, pr Principal, keyID string) error {
	ks, err := s.PersonalKeys(ctx, pr)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if k.ID == keyID {
			if err := s.keys.RevokeKey(ctx, keyID, s.clock()); err != nil {
				return wrap("revoke key", err)
			}
			return s.auditAfter(ctx)
		}
	}
	return NotFound("key", keyID)
}

// auditAfter writes the request's audit entry right after a key write:
// KeyStore's writes take no entry of their own (keys were made by
// operators only, outside the log), so the entry of a person's key
// follows its change instead of sharing its commit.
func (s *UserService) auditAfter(ctx context.Context) error {
	if e, ok := AuditUntaken(ctx); ok {
		return wrap("record audit entry", s.keys.AppendAudit(ctx, e))
	}
	return nil
}

// ExternalSignIn signs in a person an identity provider vouched for
// (OpenID Connect), matched by email. Only a verified email counts. A
// person not known yet whose email's domain is in allowedDomains joins
// viewerProject as a viewer (self-service); anyone else must have been
// invited. It starts a session and records the sign-in.
func (s *UserService) ExternalSignIn(ctx context.Context, email string, verified bool, allowedDomains []string, viewerProject, requestID, sourceIP string) (string, Principal, error) {
	if err := s.ready(); err != nil {
		return "", Principal{}, err
	}
	if !verified {
		return "", Principal{}, Unauthorized("EMAIL_NOT_VERIFIED", "your identity provider has not verified your email address; verify it there and sign in again")
	}
	e, err := normalizeEmail("email", email)
	if err != nil {
		return "", Principal{}, Unauthorized("UNAUTHORIZED", "your identity provider sent no usable email address")
	}
	u, err := s.store.UserByEmail(ctx, e)
	switch {
	case errors.Is(err, ErrNotFound):
		domain := e[strings.LastIndexByte(e, '@')+1:]
		allowed := false
		for _, d := range allowedDomains {
			allowed = allowed || strings.EqualFold(strings.TrimSpace(d), domain)
		}
		if !allowed || viewerProject == "" {
			return "", Principal{}, Unauthorized("NOT_INVITED", "%s has no account here: ask an admin to invite you", e)
		}
		now := s.clock()
		u = User{ID: s.newID(PrefixUser), Email: e, Created: now}
		if err := s.store.CreateUser(ctx, u); err != nil {
			return "", Principal{}, wrap("sign in", err)
		}
		if err := s.store.PutMembership(ctx, Membership{Project: viewerProject, User: u.ID, Role: RoleViewer, Created: now}); err != nil {
			return "", Principal{}, wrap("sign in", err)
		}
	case err != nil:
		return "", Principal{}, wrap("sign in", err)
	}
	return s.StartSession(ctx, u.ID, requestID, sourceIP)
}
