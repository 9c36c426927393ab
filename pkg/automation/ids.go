package automation

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
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
// carries only the flow ID.
func NewID(prefix string) string {
	return prefix + randomToken(16)
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
