package httpapi

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestStandardWebhooksPreset: a delivery signed by the official Standard
// Webhooks library (as Svix, OpenAI, Clerk or Resend sign) is accepted by a
// flow with the STANDARD preset on both receivers; a bad, stale or missing
// signature is a 401 with no run; a secret that is not whsec_ base64 is a
// 400 naming the field.
func TestStandardWebhooksPreset(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	now := time.Now()
	h := newHookEnv(t, HookConfig{Clock: func() time.Time { return now }})
	sig := fmt.Sprintf(`,"signature":{"preset":"STANDARD","secret":%q}`, secret)
	h.activeFlow(t, h.key, workflowFlow("clerk", "POST", sig, ""))
	fb := h.activeFlow(t, h.key, `{"name":"fb","engine":"FLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST"`+sig+`}}}`)

	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"type":"user.created","data":{"id":"user_29w83sxmDNGwOuEthce5gg56FcC"}}`
	headers := func(id string, ts time.Time, b string) []string {
		s, err := wh.Sign(id, ts, []byte(b))
		if err != nil {
			t.Fatal(err)
		}
		return []string{"webhook-id: " + id, "webhook-timestamp: " + strconv.FormatInt(ts.Unix(), 10), "webhook-signature: " + s}
	}
	call(t, h.workflow, "POST", "/webhook/clerk", "", body, headers("msg_1", now, body)...).started(t)
	call(t, h.engine, "POST", "/api/v1/webhooks/"+fb, "", body, headers("msg_2", now, body)...).started(t)
	// Two signatures while the sender rolls its secret: the second matches.
	two := headers("msg_3", now, body)
	two[2] = "webhook-signature: v1,bm90IHRoZSByaWdodCBvbmU= " + strings.TrimPrefix(two[2], "webhook-signature: ")
	call(t, h.workflow, "POST", "/webhook/clerk", "", body, two...).started(t)
	drain(t, h.svc, h.runs)

	bad := []struct {
		name string
		hdr  []string
	}{
		{"stale", headers("msg_4", now.Add(-6*time.Minute), body)},
		{"other body", headers("msg_5", now, body+" ")},
		{"missing", nil},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			before := h.runs.count()
			r := call(t, h.workflow, "POST", "/webhook/clerk", "", body, tt.hdr...)
			r.wantError(t, 401, "INVALID_SIGNATURE")
			if h.runs.count() != before {
				t.Error("a bad signature made a run")
			}
		})
	}

	r := call(t, h.api, "POST", "/api/v1/flows", h.key,
		workflowFlow("bad", "POST", `,"signature":{"preset":"STANDARD","secret":"whsec_not base64!"}`, ""))
	if e := r.wantError(t, 400, "VALIDATION_ERROR"); !strings.Contains(e.Message, "signature.secret") || !strings.Contains(e.Message, "whsec_") {
		t.Errorf("bad secret: %s", e.Message)
	}
}
