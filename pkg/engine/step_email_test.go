package engine

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"flowservice/pkg/automation"
)

// received is one message the in-process SMTP server took.
type received struct {
	from string
	to   []string
	data string
	tls  bool
	user string
}

type smtpBackend struct {
	mu   sync.Mutex
	msgs []received
}

type smtpSession struct {
	b   *smtpBackend
	c   *smtp.Conn
	cur received
}

func (b *smtpBackend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &smtpSession{b: b, c: c}, nil
}

func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "flows" || pass != "s3cret-pass" {
			return errors.New("bad credentials")
		}
		s.cur.user = user
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	s.cur.from = from
	_, s.cur.tls = s.c.TLSConnectionState()
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.to = append(s.cur.to, to)
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.data = string(b)
	s.b.mu.Lock()
	s.b.msgs = append(s.b.msgs, s.cur)
	s.b.mu.Unlock()
	return nil
}

func (s *smtpSession) Reset()        { s.cur = received{user: s.cur.user} }
func (s *smtpSession) Logout() error { return nil }

// startSMTP serves SMTP with STARTTLS on 127.0.0.1 (a certificate for that
// address, trusted through the returned pool) and authentication only
// over TLS.
func startSMTP(t *testing.T, offerTLS bool) (*smtpBackend, int, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)

	be := &smtpBackend{}
	srv := smtp.NewServer(be)
	srv.Domain = "127.0.0.1"
	if offerTLS {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return be, l.Addr().(*net.TCPAddr).Port, pool
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
	be.mu.Lock()
	msgs := be.msgs
	be.mu.Unlock()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if !m.tls || m.user != "flows" || m.from != "flows@example.com" || strings.Join(m.to, ",") != "ada@example.com,boss@example.com" {
		t.Errorf("envelope %+v: want TLS, authenticated, from flows@, to ada@ and boss@", m)
	}
	for _, want := range []string{"Subject: Welcome Ada", "Reply-To: <support@example.com>", "Hello Ada", "<p>Hello</p>"} {
		if !strings.Contains(m.data, want) {
			t.Errorf("message lacks %q:\n%s", want, m.data)
		}
	}
	out := output(t, r, 0)
	id, _ := out["messageId"].(string)
	if id == "" || !strings.Contains(m.data, "Message-ID: <"+id+">") {
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
	be.mu.Lock()
	defer be.mu.Unlock()
	if len(be.msgs) != 0 {
		t.Errorf("%d messages sent", len(be.msgs))
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
	be.mu.Lock()
	defer be.mu.Unlock()
	if len(be.msgs) != 0 {
		t.Errorf("%d messages sent without TLS", len(be.msgs))
	}
}
