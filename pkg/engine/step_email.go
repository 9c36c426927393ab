package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wneessen/go-mail"

	"flowservice/pkg/automation"
)

// An EMAIL step sends one message through an SMTP connection (go-mail):
// STARTTLS (required, not opportunistic), implicit TLS or none. Addresses
// and the subject go into headers: after rendering, a CR or LF in any of
// them fails the step, so that no header can be injected. Each send counts
// against the project's outboundPerMinute, as an HTTP request does, and
// the server is dialled through the SSRF guard after its host passed the
// connection's allowedHosts.

// SMTPTimeout bounds one send: dial, TLS, authentication and data.
const SMTPTimeout = 30 * time.Second

// email runs an EMAIL step: output {"messageId"}.
func (x *execution) email(ctx context.Context, s automation.Step) (any, error) {
	id, se := x.connectionID(s)
	if se != nil {
		return nil, se
	}
	if x.e.creds == nil {
		return nil, &stepError{msg: "connection " + id + ": no credential store is configured"}
	}
	conn, v, err := x.e.creds.ConnectionCredential(ctx, x.flow.Project, id)
	if err != nil {
		var ae *automation.Error
		if errors.As(err, &ae) {
			return nil, &stepError{msg: ae.Message}
		}
		return nil, &stepError{msg: fmt.Sprintf("connection %s: reading the credential failed: %v", id, err), retryable: true}
	}
	if v.SMTP == nil {
		return nil, &stepError{msg: fmt.Sprintf("connection %s (%s) is a %s connection; an EMAIL step needs SMTP", conn.ID, conn.Name, conn.Type)}
	}
	cfg := v.SMTP
	if err := fenced(conn, cfg.Host); err != nil {
		return nil, err
	}

	c := x.e.checker
	render := func(field, tmpl string) (string, error) {
		t, err := c.evalText(tmpl, x.env)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		return t, nil
	}
	addresses := func(field string, list []string) ([]string, error) {
		out := make([]string, 0, len(list))
		for i, a := range list {
			t, err := render(fmt.Sprintf("%s[%d]", field, i), a)
			if err != nil {
				return nil, err
			}
			if err := automation.CheckMailAddress(t); err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
			}
			out = append(out, t)
		}
		return out, nil
	}
	to, err := addresses("to", s.To)
	if err != nil {
		return nil, fail(false, err)
	}
	cc, err := addresses("cc", s.Cc)
	if err != nil {
		return nil, fail(false, err)
	}
	subject, err := render("subject", s.Subject)
	if err != nil {
		return nil, fail(false, err)
	}
	if strings.ContainsAny(subject, "\r\n") {
		return nil, &stepError{msg: "subject contains a line break (CR or LF) once rendered: a subject is one header line"}
	}
	text, err := render("text", s.Text)
	if err != nil {
		return nil, fail(false, err)
	}
	html, err := render("html", s.HTML)
	if err != nil {
		return nil, fail(false, err)
	}

	m := mail.NewMsg()
	if err := m.From(cfg.From); err != nil {
		return nil, &stepError{msg: "the connection's from address is not valid: " + err.Error()}
	}
	if err := m.To(to...); err != nil {
		return nil, &stepError{msg: "to: " + err.Error()}
	}
	if len(cc) > 0 {
		if err := m.Cc(cc...); err != nil {
			return nil, &stepError{msg: "cc: " + err.Error()}
		}
	}
	if s.ReplyTo != "" {
		r, err := addresses("replyTo", []string{s.ReplyTo})
		if err != nil {
			return nil, fail(false, err)
		}
		if err := m.ReplyTo(r[0]); err != nil {
			return nil, &stepError{msg: "replyTo: " + err.Error()}
		}
	}
	m.Subject(subject)
	m.SetMessageID()
	m.SetDate()
	switch {
	case text != "" && html != "":
		m.SetBodyString(mail.TypeTextPlain, text)
		m.AddAlternativeString(mail.TypeTextHTML, html)
	case html != "":
		m.SetBodyString(mail.TypeTextHTML, html)
	default:
		m.SetBodyString(mail.TypeTextPlain, text)
	}

	where := "SMTP " + cfg.Host
	if se := x.admitOutbound(ctx, where); se != nil {
		return nil, se
	}
	opts := []mail.Option{
		mail.WithTimeout(SMTPTimeout),
		mail.WithDialContextFunc(guardedDialer(x.e.allowPrivate).DialContext),
		mail.WithTLSConfig(&tls.Config{ServerName: cfg.Host, RootCAs: x.e.rootCAs, MinVersion: tls.VersionTLS12}),
	}
	port := cfg.Port
	switch cfg.TLS {
	case "tls":
		opts = append(opts, mail.WithSSL())
		port = cmpInt(port, 465)
	case "none":
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
		port = cmpInt(port, 25)
	default: // starttls: the upgrade is required, never skipped
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
		port = cmpInt(port, 587)
	}
	opts = append(opts, mail.WithPort(port))
	if cfg.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(cfg.Username), mail.WithPassword(cfg.Password.Reveal()))
	}
	client, err := mail.NewClient(cfg.Host, opts...)
	if err != nil {
		return nil, &stepError{msg: where + ": " + err.Error()}
	}
	var secrets []string
	if p := cfg.Password.Reveal(); p != "" {
		secrets = append(automation.SecretMasks([]string{p}), p)
	}
	sctx, cancel := context.WithTimeout(ctx, SMTPTimeout)
	defer cancel()
	endSpan := x.startOutbound(ctx, automation.OutboundSMTP, cfg.Host, port)
	err = client.DialAndSendWithContext(sctx, m)
	endSpan(err)
	if err != nil {
		var pe *privateAddrError
		var sendErr *mail.SendError
		retry := true
		switch {
		case errors.As(err, &pe):
			retry = false
		case ctx.Err() != nil:
			return nil, &stepError{msg: where + ": the run ended", retryable: true}
		case errors.As(err, &sendErr):
			retry = sendErr.IsTemp()
		}
		return nil, &stepError{msg: mask(where+": "+err.Error(), secrets), retryable: retry}
	}
	return map[string]any{"messageId": strings.Trim(m.GetMessageID(), "<>")}, nil
}
