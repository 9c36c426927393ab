package engine

import (
	"crypto/x509"
	"testing"

	"flowservice/internal/dbtest"
)

// For the Service-level tests of package engine_test.
var StartPostgres = dbtest.StartPostgres

// StartSMTP starts the in-process SMTP server (STARTTLS) and returns its
// port, its CA pool and a count of the messages it took.
func StartSMTP(t *testing.T) (int, *x509.CertPool, func() []string) {
	be, port, pool := startSMTP(t, true)
	return port, pool, func() []string {
		var out []string
		for _, m := range be.Messages() {
			out = append(out, m.Data)
		}
		return out
	}
}
