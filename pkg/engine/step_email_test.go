package engine

import (
	"context"
	"crypto/x509"
	"strings"
	"sync/atomic"
	"testing"

	"flowservice/internal/smtptest"
	"flowservice/pkg/automation"
)

// startSMTP starts the SMTP server of internal/smtptest.
func startSMTP(t *testing.T, offerTLS bool) (*smtptest.Server, int, *x509.CertPool) {
	s := smtptest.Start(t, offerTLS)
	return s, s.Port, s.Pool
}

// smtpCreds serves one SMTP connection by name.
type smtpCreds struct{ cfg automation.SMTPConfig }

func (c smtpCreds) ConnectionCredential(_ context.Context, _, id string) (automation.Connection, automation.ConnectionValue, error) {
	cfg := c.cfg
	return automation.Connection{ID: id, Project: "p1", Name: id, Type: automation.ConnectionSMTP, Status: automation.ConnectionActive},
		automation.ConnectionValue{SMTP: &cfg, Masks: []automation.Secret{cfg.Password}}, nil
}
func (smtpCreds) SetConnectionStatus(context.Context, string, string, automation.ConnectionStatus) error {
	return nil
}
func (smtpCreds) ConnectionIDsByName(context.Context, string) (map[string][]string, error) {
	return map[string][]string{"mail": {"mail"}}, nil
}

// countingGate counts the sends admitted against outboundPerMinute.
type countingGate struct{ n atomic.Int32 }

func (g *countingGate) AdmitOutbound(context.Context, string) error { g.n.Add(1); return nil }

func emailStep(to, subject string) automation.Step {
	return automation.Step{Name: "mail", Type: automation.StepEmail, Connection: "mail", To: []string{to},
		Cc: []string{"boss@example.com"}, Subject: subject, Text: "Hello {{ trigger.body.name }}", HTML: "<p>Hello</p>",
		ReplyTo: "support@example.com"}
}

// TestEmailOverSTARTTLS sends through a real SMTP server that requires
// STARTTLS before authentication: the message arrives with its headers
// and both bodies, over TLS, authenticated, counted against
// outboundPerMinute, and the output's messageId is the message's.
func TestEmailOverSTARTTLS(t *testing.T) {
	be, port, pool := startSMTP(t, true)
	gate := &countingGate{}
	creds := smtpCreds{automation.SMTPConfig{Host: "127.0.0.1", Port: port, Username: "flows", Password: "s3cret-pass",
		From: "Flows <flows@example.com>", TLS: "starttls"}}
	e := New(Config{Env: automation.ExecEnv{Credentials: creds, ConnectionNames: creds, Outbound: gate},
		AllowPrivateNetworks: true, RootCAs: pool})
	r := e.Execute(context.Background(), flowOf(emailStep("{{ trigger.body.to }}", "Welcome {{ trigger.body.name }}")),
		runOf(`{"to": "ada@example.com", "name": "Ada"}`)).Run
	if r.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Steps[0].Error)
	}
	msgs := be.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if !m.TLS || m.User != "flows" || m.From != "flows@example.com" || strings.Join(m.To, ",") != "ada@example.com,boss@example.com" {
		t.Errorf("envelope %+v: want TLS, authenticated, from flows@, to ada@ and boss@", m)
	}
	for _, want := range []string{"Subject: Welcome Ada", "Reply-To: <support@example.com>", "Hello Ada", "<p>Hello</p>"} {
		if !strings.Contains(m.Data, want) {
			t.Errorf("message lacks %q:\n%s", want, m.Data)
		}
	}
	out := output(t, r, 0)
	id, _ := out["messageId"].(string)
	if id == "" || !strings.Contains(m.Data, "Message-ID: <"+id+">") {
		t.Errorf("messageId %q is not the message's", id)
	}
	if gate.n.Load() != 1 {
		t.Errorf("outboundPerMinute admitted %d sends, want 1", gate.n.Load())
	}
}

// TestEmailHeaderInjectionFails: a CR or LF that a template brings into an
// address or the subject fails the step before anything is sent.
func TestEmailHeaderInjectionFails(t *testing.T) {
	be, port, pool := startSMTP(t, true)
	creds := smtpCreds{automation.SMTPConfig{Host: "127.0.0.1", Port: port, From: "flows@example.com", TLS: "starttls"}}
	e := New(Config{Env: automation.ExecEnv{Credentials: creds, ConnectionNames: creds}, AllowPrivateNetworks: true, RootCAs: pool})
	for _, tc := range []struct{ to, subject, body, want string }{
		{"{{ trigger.body.x }}", "Hi", `{"x": "a@example.com\r\nBcc: victim@example.com", "name": "A"}`, "to[0]: an address contains a line break"},
		{"a@example.com", "{{ trigger.body.x }}", `{"x": "Hi\nBcc: victim@example.com", "name": "A"}`, "subject contains a line break"},
	} {
		r := e.Execute(context.Background(), flowOf(emailStep(tc.to, tc.subject)), runOf(tc.body)).Run
		if r.Status != automation.RunFailed || !strings.Contains(r.Steps[0].Error, tc.want) {
			t.Errorf("%s: run %s %q, want FAILED with %q", tc.body, r.Status, r.Steps[0].Error, tc.want)
		}
	}
	if msgs := be.Messages(); len(msgs) != 0 {
		t.Errorf("%d messages sent", len(msgs))
	}
}

// TestEmailRequiresSTARTTLS: a server that does not offer STARTTLS gets
// nothing (no fallback to plain text), and the password is not shown.
func TestEmailRequiresSTARTTLS(t *testing.T) {
	be, port, pool := startSMTP(t, false)
	creds := smtpCreds{automation.SMTPConfig{Host: "127.0.0.1", Port: port, Username: "flows", Password: "s3cret-pass",
		From: "flows@example.com", TLS: "starttls"}}
	e := New(Config{Env: automation.ExecEnv{Credentials: creds, ConnectionNames: creds}, AllowPrivateNetworks: true, RootCAs: pool})
	r := e.Execute(context.Background(), flowOf(emailStep("a@example.com", "Hi")), runOf(`{"name": "A"}`)).Run
	if r.Status == automation.RunSucceeded || strings.Contains(r.Steps[0].Error, "s3cret-pass") {
		t.Errorf("run %s %q: want a failure without the password", r.Status, r.Steps[0].Error)
	}
	if msgs := be.Messages(); len(msgs) != 0 {
		t.Errorf("%d messages sent without TLS", len(msgs))
	}
}
