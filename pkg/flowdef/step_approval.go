package flowdef

import (
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"
)

// APPROVAL: the run waits, durably, until people decide (docs/flows.md,
// "APPROVAL"). Its notify steps run when the wait begins, with the links
// in scope; the decision, its form values and who decided are the output.

// Approvers narrows who may decide from the API or the dashboard: a key or
// session of one of Roles, or a person (a session or a personal key) of
// Emails (operator or above in any case; an admin always may). A link is
// a decider of its own, whoever holds it.
type Approvers struct {
	Roles  []string `json:"roles,omitempty"`
	Emails []string `json:"emails,omitempty"`
}

// Bounds of APPROVAL and of WAIT for a callback.
const (
	MaxApprovals       = 10
	MinWaitTimeout     = time.Minute
	DefaultWaitTimeout = 7 * 24 * time.Hour
	// MaxTitleBytes bounds an APPROVAL's title as written and as rendered.
	MaxTitleBytes = 500
	// MaxNotifySteps bounds the steps an APPROVAL or WAIT runs when the
	// wait begins (nested ones included; they count towards MaxSteps too).
	MaxNotifySteps = 10
	// MaxApproverEmails bounds approvers.emails: each decision looks
	// through them.
	MaxApproverEmails = 50
	// maxEmailBytes is RFC 5321's limit on a forward path.
	maxEmailBytes = 254
)

// ApproverRoles are the roles approvers.roles may name: the roles that
// may decide at all (a viewer never does).
var ApproverRoles = []string{"admin", "editor", "operator"}

func init() {
	register(Rules{
		Type:        StepApproval,
		Fields:      []string{"title", "form", "approvals", "approvers", "timeout", "notify"},
		SideEffects: true,
		Parks: func(*Step) (string, string) {
			return "APPROVAL cannot run inside FOR_EACH; ask before or after the loop",
				"APPROVAL cannot run in onError steps; they run once the run has ended"
		},
		Check: checkApproval,
	})
}

func checkApproval(c Checks, st *Step, at string) error {
	if strings.TrimSpace(st.Title) == "" {
		return Invalid(`%s.title is required for APPROVAL: what the deciders are asked, e.g. "Refund {{ trigger.body.amount }}?"`, at)
	}
	if len(st.Title) > MaxTitleBytes {
		return Invalid("%s.title: %d bytes; at most %d", at, len(st.Title), MaxTitleBytes)
	}
	if err := c.Template(st.Title); err != nil {
		return Invalid("%s.title: %v", at, err)
	}
	if len(st.Form) > 0 {
		if _, err := ParseFormSchema(st.Form); err != nil {
			return Invalid("%s.form: %v", at, err)
		}
	}
	if st.Approvals == 0 {
		st.Approvals = 1
	}
	if st.Approvals < 1 || st.Approvals > MaxApprovals {
		return Invalid("%s.approvals %d: use 1 to %d distinct deciders", at, st.Approvals, MaxApprovals)
	}
	if st.Approvers != nil {
		for i, r := range st.Approvers.Roles {
			if !slices.Contains(ApproverRoles, r) {
				return Invalid("%s.approvers.roles[%d] %q: allowed values are %s", at, i, ClipID(r), strings.Join(ApproverRoles, ", "))
			}
		}
		if n := len(st.Approvers.Emails); n > MaxApproverEmails {
			return Invalid("%s.approvers.emails: %d addresses; at most %d", at, n, MaxApproverEmails)
		}
		for i, e := range st.Approvers.Emails {
			if !validApproverEmail(e) {
				return Invalid("%s.approvers.emails[%d] %q is not an email address such as ada@example.com", at, i, ClipID(e))
			}
			// People are matched case-insensitively, as they sign in.
			st.Approvers.Emails[i] = strings.ToLower(strings.TrimSpace(e))
		}
	}
	if _, err := st.WaitTimeout(); err != nil {
		return Invalid("%s.%v", at, err)
	}
	return checkNotify(st, at)
}

// validApproverEmail accepts a bare address with a domain, as people's
// emails are (no display name, no comment).
func validApproverEmail(e string) bool {
	e = strings.TrimSpace(e)
	if e == "" || len(e) > maxEmailBytes {
		return false
	}
	a, err := mail.ParseAddress(e)
	return err == nil && a.Name == "" && strings.EqualFold(a.Address, e) &&
		strings.Contains(e[strings.LastIndexByte(e, '@')+1:], ".")
}

// WaitTimeout is how long an APPROVAL or a WAIT for a callback waits:
// its timeout, or DefaultWaitTimeout.
func (s *Step) WaitTimeout() (time.Duration, error) {
	if s.Timeout == "" {
		return DefaultWaitTimeout, nil
	}
	d, err := time.ParseDuration(s.Timeout)
	if err != nil || d < MinWaitTimeout || d > MaxWait {
		return 0, fmt.Errorf("timeout %q: use a duration from 1m to 720h (30 days), such as \"72h\"", s.Timeout)
	}
	return d, nil
}

// checkNotify refuses notify steps that would wait themselves: they run
// while the wait begins, before the run parks.
func checkNotify(st *Step, at string) error {
	if n := CountSteps(st.Notify); n > MaxNotifySteps {
		return Invalid("%s.notify: %d steps; at most %d", at, n, MaxNotifySteps)
	}
	var bad *Step
	WalkSteps(st.Notify, func(n *Step) {
		if r := registry[n.Type]; bad == nil && r != nil && r.Parks != nil {
			if why, _ := r.Parks(n); why != "" {
				bad = n
			}
		}
	})
	if bad != nil {
		return Invalid("%s.notify: step %q (%s) would wait; notify steps run while the wait begins and cannot wait themselves", at, bad.Name, bad.Type)
	}
	return nil
}
