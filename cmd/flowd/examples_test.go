package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowservice/internal/testwait"
)

// exampleFlow creates and enables the flow of an examples/ file on a
// running flowd, its signing secret replaced by secret, and returns its ID.
func exampleFlow(t *testing.T, base, key, file, placeholder, secret string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	def := strings.Replace(string(raw), placeholder, secret, 1)
	if def == string(raw) {
		t.Fatalf("%s has no %q to replace", file, placeholder)
	}
	var f struct{ ID string }
	doJSON(t, "POST", base+"/api/v1/flows", key, "application/json", def, nil, 201, &f)
	doJSON(t, "POST", base+"/api/v1/flows/"+f.ID+"/enable", key, "", "", nil, 200, nil)
	return f.ID
}

// doJSON sends one request and checks its status; into, when set, gets the
// JSON answer. It returns the answer's body and headers.
func doJSON(t *testing.T, method, url, key, contentType, body string, hdr map[string]string, want int, into any) ([]byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d, want %d: %s", method, url, resp.StatusCode, want, b)
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return b, resp.Header
}

func hmacHex(secret, payload string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(payload))
	return hex.EncodeToString(m.Sum(nil))
}

// TestExamples loads each examples/ flow into a started flowd and sends it
// what the provider sends: Slack's signed url_verification gets its
// challenge back as text; a Stripe event delivered twice makes one run.
func TestExamples(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir)
	raw, err := os.ReadFile(filepath.Join(dir, "initial-api-key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(raw))
	ts := strconv.FormatInt(time.Now().Unix(), 10)

	t.Run("slack challenge", func(t *testing.T) {
		exampleFlow(t, p.base, key, "slack-challenge.json", "replace-with-your-slack-signing-secret", "slack-secret")
		body := `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
		sig := map[string]string{"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + hmacHex("slack-secret", "v0:"+ts+":"+body)}
		got, hdr := doJSON(t, "POST", p.base+"/webhook/slack/events", "", "application/json", body, sig, 200, nil)
		if string(got) != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
			t.Errorf("challenge answer %q (%s)", got, hdr.Get("Content-Type"))
		}
		// Another event is acknowledged with an empty 200.
		body = `{"type":"event_callback","event":{"type":"app_mention"}}`
		sig["X-Slack-Signature"] = "v0=" + hmacHex("slack-secret", "v0:"+ts+":"+body)
		if got, _ := doJSON(t, "POST", p.base+"/webhook/slack/events", "", "application/json", body, sig, 200, nil); len(got) != 0 {
			t.Errorf("event answer %q, want empty", got)
		}
		sig["X-Slack-Signature"] = "v0=" + hmacHex("not-the-secret", "v0:"+ts+":"+body)
		doJSON(t, "POST", p.base+"/webhook/slack/events", "", "application/json", body, sig, 401, nil)
	})

	t.Run("stripe dedup", func(t *testing.T) {
		id := exampleFlow(t, p.base, key, "stripe-dedup.json", "whsec_replace_with_your_endpoint_secret", "whsec_test")
		body := `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","type":"invoice.paid","data":{"object":{"id":"in_1","amount_paid":2000}}}`
		sig := map[string]string{"Stripe-Signature": "t=" + ts + ",v1=" + hmacHex("whsec_test", ts+"."+body)}
		var first, again struct{ RunID string }
		doJSON(t, "POST", p.base+"/api/v1/webhooks/"+id, "", "application/json", body, sig, 200, &first)
		doJSON(t, "POST", p.base+"/api/v1/webhooks/"+id, "", "application/json", body, sig, 200, &again)
		if first.RunID == "" || again.RunID != first.RunID {
			t.Errorf("redelivery: run %q, first %q", again.RunID, first.RunID)
		}
		var runs struct{ Data []struct{ ID, Status string } }
		testwait.For(t, testwait.Hang, "one SUCCEEDED run of the deduplicated deliveries", func() bool {
			doJSON(t, "GET", p.base+"/api/v1/flows/"+id+"/runs", key, "", "", nil, 200, &runs)
			if len(runs.Data) > 1 {
				t.Fatalf("runs = %+v, want one", runs.Data)
			}
			return len(runs.Data) == 1 && runs.Data[0].Status == "SUCCEEDED"
		})
		var run struct {
			Steps []struct{ Output map[string]any }
		}
		doJSON(t, "GET", p.base+"/api/v1/flows/"+id+"/runs/"+first.RunID, key, "", "", nil, 200, &run)
		if out := run.Steps[1].Output; out["event"] != "evt_1NG8Du2eZvKYlo2CUI79vXWy" || out["invoice"] != "in_1" {
			t.Errorf("invoice step output %v", out)
		}
	})
}
