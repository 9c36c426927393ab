package flowdef

import (
	"fmt"
	"net/mail"
	"strings"
)

// Limits of EMAIL steps (docs/reliability.md).
const (
	MaxEmailRecipients = 50        // to and cc together
	MaxEmailBodyBytes  = 512 << 10 // text and html, each, as written in the step
	MaxEmailSubject    = 998       // one header line (RFC 5322)
)

func init() {
	register(Rules{
		Type:        StepEmail,
		Fields:      []string{"connection", "to", "cc", "subject", "text", "html", "replyTo", "retry"},
		SideEffects: true,
		Check:       checkEmail,
	})
}

// checkEmail checks an EMAIL step. Addresses and the subject go into
// headers: a CR or LF in them is refused here when written literally, and
// fails the step when a template renders one.
func checkEmail(c Checks, st *Step, at string) error {
	if err := CheckText(at+".connection", st.Connection, 200); err != nil {
		return Invalid(`%s (the name of an SMTP connection, e.g. "mail")`, err.(*Error).Message)
	}
	if len(st.To) == 0 {
		return Invalid(`%s.to is required for EMAIL: a list of addresses, e.g. ["ada@example.com"]`, at)
	}
	if n := len(st.To) + len(st.Cc); n > MaxEmailRecipients {
		return Invalid("%s: %d recipients in to and cc; at most %d are allowed", at, n, MaxEmailRecipients)
	}
	check := func(field, v string) error {
		if err := c.Template(v); err != nil {
			return Invalid("%s.%s: %v", at, field, err)
		}
		if strings.ContainsAny(v, "\r\n") {
			return Invalid("%s.%s contains a line break (CR or LF): it goes into a mail header, which is one line", at, field)
		}
		if !strings.Contains(v, "{{") {
			if _, err := mail.ParseAddress(v); err != nil {
				return Invalid("%s.%s %q is not an email address", at, field, clip(v))
			}
		}
		return nil
	}
	for i, a := range st.To {
		if err := check(fmt.Sprintf("to[%d]", i), a); err != nil {
			return err
		}
	}
	for i, a := range st.Cc {
		if err := check(fmt.Sprintf("cc[%d]", i), a); err != nil {
			return err
		}
	}
	if st.ReplyTo != "" {
		if err := check("replyTo", st.ReplyTo); err != nil {
			return err
		}
	}
	if strings.TrimSpace(st.Subject) == "" {
		return Invalid("%s.subject is required for EMAIL", at)
	}
	if len(st.Subject) > MaxEmailSubject {
		return Invalid("%s.subject is longer than %d bytes", at, MaxEmailSubject)
	}
	if strings.ContainsAny(st.Subject, "\r\n") {
		return Invalid("%s.subject contains a line break (CR or LF): a subject is one line", at)
	}
	if err := c.Template(st.Subject); err != nil {
		return Invalid("%s.subject: %v", at, err)
	}
	if st.Text == "" && st.HTML == "" {
		return Invalid("%s: EMAIL needs text or html (or both)", at)
	}
	for field, v := range map[string]string{"text": st.Text, "html": st.HTML} {
		if len(v) > MaxEmailBodyBytes {
			return Invalid("%s.%s is %d bytes; at most %d are allowed", at, field, len(v), MaxEmailBodyBytes)
		}
		if err := c.Template(v); err != nil {
			return Invalid("%s.%s: %v", at, field, err)
		}
	}
	return nil
}
