package automation

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"
)

// BenchmarkVerifySignature checks a GitHub-style HMAC-SHA256 signature of
// a small webhook body.
func BenchmarkVerifySignature(b *testing.B) {
	body := []byte(`{"event":"push","ref":"refs/heads/main","data":{"id":12345,"user":"octo"}}`)
	mac := hmac.New(sha256.New, []byte("s3cret-value"))
	mac.Write(body)
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	sig := Signature{Preset: PresetGitHub, Secret: Secret("s3cret-value")}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if err := VerifySignature(sig, h.Get, body, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHashAPIKey is the per-request part of authentication that does
// not touch the store: hashing the presented key.
func BenchmarkHashAPIKey(b *testing.B) {
	key := "fk_live_0123456789abcdefghijklmnopqrstuv"
	b.ReportAllocs()
	for b.Loop() {
		_ = HashAPIKey(key)
	}
}
