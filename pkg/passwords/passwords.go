// Package passwords stores people's passwords as argon2id hashes
// (RFC 9106), in the PHC string format
// "$argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<hash>", so that
// the parameters can be raised later and old hashes still check. It
// implements automation.PasswordHasher.
package passwords

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"

	"flowservice/pkg/automation"
)

// Params are argon2id's cost parameters.
type Params struct {
	MemoryKiB uint32
	Passes    uint32
	Lanes     uint8
}

// Default follows RFC 9106's second recommended option scaled to a small
// server: 19 MiB, 2 passes, 1 lane (OWASP's argon2id minimum), about 30 ms
// on one core, so that a 2-core flowd or a 1,024 MB Lambda can check
// sign-ins without starving runs.
var Default = Params{MemoryKiB: 19 * 1024, Passes: 2, Lanes: 1}

const (
	saltLen = 16
	keyLen  = 32
	// maxMemoryKiB bounds the memory a stored hash may ask for: a tampered
	// or foreign hash cannot make a sign-in allocate gigabytes.
	maxMemoryKiB = 256 * 1024
	maxPasses    = 16
)

// Hasher hashes with its Params (Default when zero).
type Hasher struct{ Params Params }

var _ automation.PasswordHasher = Hasher{}

func (h Hasher) params() Params {
	if h.Params.MemoryKiB == 0 {
		return Default
	}
	return h.Params
}

// HashPassword returns pw's argon2id hash with a fresh 128-bit salt.
func (h Hasher) HashPassword(pw string) (string, error) {
	p := h.params()
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("passwords: salt: %w", err)
	}
	key := argon2.IDKey([]byte(pw), salt, p.Passes, p.MemoryKiB, p.Lanes, keyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.MemoryKiB, p.Passes, p.Lanes,
		enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// CheckPassword reports whether pw matches hash, in constant time.
func (Hasher) CheckPassword(hash, pw string) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return false, errors.New("passwords: not an argon2id hash")
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, fmt.Errorf("passwords: argon2 version %q", parts[2])
	}
	var p Params
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Passes, &p.Lanes); err != nil {
		return false, fmt.Errorf("passwords: parameters %q: %w", parts[3], err)
	}
	if p.MemoryKiB == 0 || p.MemoryKiB > maxMemoryKiB || p.Passes == 0 || p.Passes > maxPasses || p.Lanes == 0 {
		return false, fmt.Errorf("passwords: parameters %q out of bounds", parts[3])
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil {
		return false, fmt.Errorf("passwords: salt: %w", err)
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, errors.New("passwords: hash: not base64")
	}
	got := argon2.IDKey([]byte(pw), salt, p.Passes, p.MemoryKiB, p.Lanes, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}
