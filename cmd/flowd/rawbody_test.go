package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowservice/internal/testwait"
)

// TestCodeChecksTheSignatureOverRawBody: the interface document's
// workflow-builder pattern, a signature check in a code step that raises
// "Invalid webhook signature" on a mismatch, works on a pretty-printed
// body (which JSON.stringify(trigger.body) would not reproduce), and
// GitHub's default form-encoded delivery reaches the flow builder
// receiver with its payload and its signature over the form's bytes.
func TestCodeChecksTheSignatureOverRawBody(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	const secret = "gh-secret"
	id := createCodeFlow(t, p, key, `{"name": "github", "engine": "FLOW_BUILDER", "steps": [
		{"name": "verify", "type": "CODE", "code":
			"const want = 'sha256=' + hmacSHA256Hex('`+secret+`', trigger.rawBody);\nif (!timingSafeEqual(want, trigger.headers['x-hub-signature-256'] || '')) throw new Error('Invalid webhook signature');\nreturn {ok: true};"},
		{"name": "push", "type": "SET", "values": {"payload": "{{ trigger.body.payload }}"}}]}`)

	send := func(contentType, body, signature string) codeRun {
		t.Helper()
		req, _ := http.NewRequest("POST", p.base+"/api/v1/webhooks/"+id, strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("X-Hub-Signature-256", signature)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var acc struct{ RunID string }
		err = json.NewDecoder(resp.Body).Decode(&acc)
		resp.Body.Close()
		if resp.StatusCode != 200 || err != nil {
			t.Fatalf("%s delivery = %d %v", contentType, resp.StatusCode, err)
		}
		var r codeRun
		testwait.For(t, 30*time.Second, "run "+acc.RunID, func() bool {
			api(t, p, key, "GET", fmt.Sprintf("/api/v1/flows/%s/runs/%s", id, acc.RunID), "", 200, &r)
			return r.Status != "RUNNING"
		})
		return r
	}
	sign := func(b string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(b))
		return "sha256=" + hex.EncodeToString(m.Sum(nil))
	}

	pretty := "{\n  \"ref\": \"refs/heads/main\",\n  \"after\": \"abc\"\n}\n"
	if r := send("application/json", pretty, sign(pretty)); r.Status != "SUCCEEDED" {
		t.Fatalf("pretty JSON with its signature: %s %q %+v", r.Status, r.Error, r.Steps)
	}
	if r := send("application/json", pretty, sign(pretty+" ")); r.Status != "FAILED" || !strings.Contains(r.Error, "Invalid webhook signature") {
		t.Fatalf("a wrong signature: %s %q; want FAILED with Invalid webhook signature", r.Status, r.Error)
	}
	form := "payload=" + url.QueryEscape(`{"ref":"refs/heads/main","after":"abc"}`)
	r := send("application/x-www-form-urlencoded", form, sign(form))
	if r.Status != "SUCCEEDED" || len(r.Steps) != 2 || !strings.Contains(string(r.Steps[1].Output), `refs/heads/main`) {
		t.Fatalf("GitHub's form delivery: %s %q %+v", r.Status, r.Error, r.Steps)
	}
}
