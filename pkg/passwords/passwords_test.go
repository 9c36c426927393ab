package passwords

import (
	"strings"
	"testing"
)

func TestHashAndCheck(t *testing.T) {
	h := Hasher{Params: Params{MemoryKiB: 1024, Passes: 1, Lanes: 1}} // cheap for the test
	enc, err := h.HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(enc, "$argon2id$v=19$m=1024,t=1,p=1$") {
		t.Fatalf("hash %q: want the PHC argon2id form", enc)
	}
	if ok, err := h.CheckPassword(enc, "correct horse battery"); err != nil || !ok {
		t.Fatalf("right password: ok=%v err=%v", ok, err)
	}
	if ok, err := h.CheckPassword(enc, "correct horse batterY"); err != nil || ok {
		t.Fatalf("wrong password: ok=%v err=%v", ok, err)
	}
	again, _ := h.HashPassword("correct horse battery")
	if again == enc {
		t.Fatal("two hashes of one password are equal: the salt is not fresh")
	}
}

func TestCheckRefusesBadHashes(t *testing.T) {
	for _, bad := range []string{
		"", "plain", "$2a$10$abc", // bcrypt
		"$argon2id$v=19$m=99999999,t=1,p=1$c2FsdHNhbHRzYWx0$aGFzaA", // asks for 95 GiB
		"$argon2id$v=16$m=1024,t=1,p=1$c2FsdA$aGFzaA",
		"$argon2id$v=19$m=1024,t=1,p=1$!!$aGFzaA",
	} {
		if ok, err := (Hasher{}).CheckPassword(bad, "x"); err == nil || ok {
			t.Errorf("CheckPassword(%q) = %v, %v; want an error", bad, ok, err)
		}
	}
}
