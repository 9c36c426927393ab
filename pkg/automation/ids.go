package automation

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"sync/atomic"
	"time"
)

// ID prefixes tell resources apart at a glance.
const (
	PrefixProject    = "prj_"
	PrefixKey        = "key_"
	PrefixFlow       = "flw_"
	PrefixConnection = "con_"
	PrefixRun        = "run_"
	PrefixAPIKey     = "fsk_" // the secret key itself, not its ID
)

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns prefix followed by 128 random bits, lower-case base32 (26
// characters): URL-safe and unguessable, because a flow builder webhook URL
// carries only the flow ID. Run IDs (PrefixRun) are NewRunID's instead.
func NewID(prefix string) string {
	switch prefix {
	case PrefixRun:
		return NewRunID(time.Now())
	case PrefixAudit:
		return newAuditID(time.Now())
	}
	return prefix + randomToken(16)
}

// lastAuditNanos is the time of the latest audit ID this process made.
var lastAuditNanos atomic.Int64

// newAuditID returns PrefixAudit, the time t in nanoseconds (13
// characters that sort as the times do), strictly later than any audit ID
// this process made before, and 80 random bits. The log is ordered by
// time in milliseconds, then ID (AuditSortKey): entries one request or
// one process writes within a millisecond keep the order they were made
// in, where random IDs would shuffle them.
func newAuditID(t time.Time) string {
	n := t.UnixNano()
	for {
		last := lastAuditNanos.Load()
		next := max(n, last+1)
		if lastAuditNanos.CompareAndSwap(last, next) {
			n = next
			break
		}
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	return PrefixAudit + timeEncoding.EncodeToString(b[:]) + randomToken(10)
}

// timeEncoding sorts as its values do: its alphabet is in ASCII order.
var timeEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// NewRunID returns PrefixRun, the time t in milliseconds since 1970 (10
// characters, 50 bits, that sort as the times do) and 96 random bits (20
// characters):
// still unguessable, and runs created together have neighbouring IDs, so
// that a store's index on run IDs takes a burst of new runs in a few pages
// at its end instead of one random page each (each of which the embedded
// store writes to its log at every commit).
func NewRunID(t time.Time) string {
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli())<<14) // top 50 bits: 10 characters
	return PrefixRun + timeEncoding.EncodeToString(ms[:])[:10] + randomToken(12)
}

// newAPIKey returns a fresh secret API key: 256 random bits.
func newAPIKey() string { return PrefixAPIKey + randomToken(32) }

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return idEncoding.EncodeToString(b)
}

// HashAPIKey is the stored form of an API key. A fast hash is enough: the
// key holds 256 random bits, so there is nothing to brute-force.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
