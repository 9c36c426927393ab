// Package smtptest is an SMTP server on 127.0.0.1 for the tests of EMAIL
// steps (github.com/emersion/go-smtp): STARTTLS with a certificate for
// 127.0.0.1 that the returned pool trusts, PLAIN authentication only over
// TLS, and every message it took kept with its envelope.
package smtptest

import (
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
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// The account the server accepts.
const (
	User     = "flows"
	Password = "s3cret-pass"
)

// Message is one message the server took.
type Message struct {
	From string
	To   []string
	Data string // as sent, headers and body
	TLS  bool   // the session was upgraded before MAIL FROM
	User string // the authenticated user, "" for none
}

// Server is a running server; it stops when the test ends.
type Server struct {
	Port int
	// Pool trusts the server's certificate (engine.Config.RootCAs).
	Pool *x509.CertPool

	mu   sync.Mutex
	msgs []Message
}

// Messages returns the messages taken so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Start serves SMTP on a free port of 127.0.0.1; offerTLS false serves no
// STARTTLS (to test that a client requiring it sends nothing).
func Start(t testing.TB, offerTLS bool) *Server {
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
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Pool: x509.NewCertPool()}
	s.Pool.AddCert(cert)

	srv := smtp.NewServer(backend{s})
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
	s.Port = l.Addr().(*net.TCPAddr).Port
	return s
}

type backend struct{ s *Server }

func (b backend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &session{s: b.s, c: c}, nil
}

type session struct {
	s   *Server
	c   *smtp.Conn
	cur Message
}

func (ss *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (ss *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != User || pass != Password {
			return errors.New("bad credentials")
		}
		ss.cur.User = user
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.cur.From = from
	_, ss.cur.TLS = ss.c.TLSConnectionState()
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.cur.To = append(ss.cur.To, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.cur.Data = string(b)
	ss.s.mu.Lock()
	ss.s.msgs = append(ss.s.msgs, ss.cur)
	ss.s.mu.Unlock()
	return nil
}

func (ss *session) Reset()        { ss.cur = Message{User: ss.cur.User} }
func (ss *session) Logout() error { return nil }
