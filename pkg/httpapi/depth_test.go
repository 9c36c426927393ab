package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

func nested(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

func TestJSONDepthExceeds(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		limit int
		want  bool
	}{
		{"flat object", `{"a":1}`, 1, false},
		{"at the limit", nested("[", "]", 3), 3, false},
		{"one past", nested("[", "]", 4), 3, true},
		{"objects count", `{"a":{"b":{"c":{}}}}`, 3, true},
		{"brackets in strings do not count", `["[[[[{{{{"]`, 1, false},
		{"escaped quote keeps the string open", `["\"[[[[["]`, 1, false},
		{"escaped backslash closes the string", `["\\",[[1]]]`, 2, true},
		{"siblings do not add up", `[[1],[2],[3],[4]]`, 2, false},
		{"invalid JSON is still scanned", `[[[[`, 3, true},
		{"9,999 arrays", nested("[", "]", 9999), MaxJSONDepth, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jsonDepthExceeds([]byte(tt.body), tt.limit); got != tt.want {
				t.Errorf("jsonDepthExceeds(%.40q, %d) = %v, want %v", tt.body, tt.limit, got, tt.want)
			}
		})
	}
}

// The repro: 9,999 nested arrays to a flow builder webhook were
// accepted, and the stored run could never be read again. Now they are a
// 400 before anything is stored, and the runs list stays readable.
func TestDeepBodyRefusedByFlowBuilderWebhook(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	fb := h.activeFlow(t, h.key, `{"name":"fb","engine":"FLOW_BUILDER"}`)
	r := call(t, h.engine, "POST", "/api/v1/webhooks/"+fb, "", nested("[", "]", 9999))
	e := r.wantError(t, http.StatusBadRequest, "BODY_TOO_DEEP")
	if !strings.Contains(e.Message, "64") {
		t.Errorf("message %q does not state the limit", e.Message)
	}
	if r.header.Get("X-Run-Id") != "" || h.runs.count() != 0 {
		t.Errorf("X-Run-Id %q, %d runs queued: want no run", r.header.Get("X-Run-Id"), h.runs.count())
	}
	var l struct{ Data []json.RawMessage }
	call(t, h.api, "GET", "/api/v1/flows/"+fb+"/runs", h.key, "").into(t, http.StatusOK, &l)
	if len(l.Data) != 0 {
		t.Errorf("runs = %d, want none", len(l.Data))
	}
	// At the limit the body is accepted, stored and read back whole.
	ok := nested("[", "]", MaxJSONDepth)
	runID := call(t, h.engine, "POST", "/api/v1/webhooks/"+fb, "", ok).started(t)
	run := h.run(t, fb, runID)
	if got := compactJSON(t, run.Trigger.Body); got != ok {
		t.Errorf("stored body %.80s, want %.80s", got, ok)
	}
}

func TestDeepBodyRefusedByWorkflowHook(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	h.activeFlow(t, h.key, workflowFlow("deep", "POST", "", ""))
	for _, ct := range []string{"application/json", "application/vnd.api+json"} {
		r := call(t, h.workflow, "POST", "/webhook/deep", "", `{"a":`+nested("[", "]", 200)+`}`, "Content-Type: "+ct)
		r.wantError(t, http.StatusBadRequest, "BODY_TOO_DEEP")
	}
	// The same bytes as text are a string: no nesting to bound.
	call(t, h.workflow, "POST", "/webhook/deep", "", nested("[", "]", 200), "Content-Type: text/plain").started(t)
	if n := h.runs.count(); n != 1 {
		t.Errorf("runs queued = %d, want 1 (the text body)", n)
	}
}

func TestDeepBodyRefusedByAPI(t *testing.T) {
	srv, key := newTestServer(t)
	deepSteps := `{"name":"x","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"v":` + nested("[", "]", 100) + `}}]}`
	call(t, srv, "POST", "/api/v1/flows", key, deepSteps).wantError(t, http.StatusBadRequest, "BODY_TOO_DEEP")
	f := createFlow(t, srv, key, flowBuilderBody)
	call(t, srv, "POST", "/api/v1/flows/"+f.ID, key, nested("{\"a\":", "}", 65)).wantError(t, http.StatusBadRequest, "BODY_TOO_DEEP")
	call(t, srv, "POST", "/api/v1/connections", key, nested("[", "]", 9999)).wantError(t, http.StatusBadRequest, "BODY_TOO_DEEP")
}

// FuzzParseHookBody: whatever the content type and bytes, parsing a
// workflow builder body never panics, and what it accepts is valid JSON
// within MaxJSONDepth that encoding/json reads back, even wrapped two
// levels deeper as a stored run is.
func FuzzParseHookBody(f *testing.F) {
	for _, seed := range []struct{ ct, body string }{
		{"application/json", `{"a":[1,2,{"b":null}]}`},
		{"application/json; charset=utf-8", `"just a string"`},
		{"application/vnd.github+json", nested("[", "]", 64)},
		{"application/json", nested("[", "]", 65)},
		{"application/json", `{"a":"\"[[[["}`},
		{"application/x-www-form-urlencoded", "a=1&a=2&b=%41"},
		{"application/x-www-form-urlencoded", "%zz"},
		{"text/plain", "[[[[[["},
		{"multipart/form-data; boundary=x", "--x\r\n\r\n--x--"},
		{"", ""},
		{"application/json", "{\"a\":1}{"},
		{";;;=", "\xff\xfe"},
		{"application/json", `{"n": 1e999999}`},
		{"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.bin\"\r\n\r\n\xff\x00\r\n--x\r\nContent-Disposition: form-data; name=\"n\"\r\n\r\ntext\r\n--x--"},
	} {
		f.Add(seed.ct, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, contentType string, raw []byte) {
		hb, err := parseHookBody(contentType, raw)
		body := hb.body
		if err != nil {
			if !errors.Is(err, automation.ErrInvalid) {
				t.Fatalf("refusal %v is not a client error", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted body is not valid JSON: %q", body)
		}
		if jsonDepthExceeds(body, MaxJSONDepth) {
			t.Fatalf("accepted body nests deeper than %d", MaxJSONDepth)
		}
		// Never lossy: bytes kept as base64 are the body; a string body is
		// the body's text.
		if hb.base64 != "" {
			if b, err := base64.StdEncoding.DecodeString(hb.base64); err != nil || !bytes.Equal(b, raw) {
				t.Fatalf("bodyBase64 does not decode to the body")
			}
		}
		var str string
		mt, _, _ := mime.ParseMediaType(contentType)
		isJSON := mt == "application/json" || strings.HasSuffix(mt, "+json")
		if !isJSON && bytes.HasPrefix(body, []byte(`"`)) && (json.Unmarshal(body, &str) != nil || str != string(raw)) {
			t.Fatalf("string body %q is not the body %q", str, raw)
		}
		wrapped := append(append([]byte(`{"trigger":{"body":`), body...), `}}`...)
		var v any
		if err := json.Unmarshal(wrapped, &v); err != nil {
			t.Fatalf("stored form cannot be read back: %v", err)
		}
	})
}

// FuzzJSONDepth: on valid JSON, the byte scan agrees with the depth
// encoding/json's tokenizer sees, so the check cannot be fooled by
// strings, escapes or white space.
func FuzzJSONDepth(f *testing.F) {
	for _, seed := range []string{`[]`, `{"a":[{"b":"]]]"}]}`, `["\\\"[["]`, nested("[", "]", 70), ` [ [ ] ] `, `"x"`, `{"\u005b":1}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			jsonDepthExceeds(b, MaxJSONDepth) // must not panic on anything
			return
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		depth, deepest := 0, 0
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			switch tok {
			case json.Delim('['), json.Delim('{'):
				depth++
				deepest = max(deepest, depth)
			case json.Delim(']'), json.Delim('}'):
				depth--
			}
		}
		for _, limit := range []int{0, 1, 2, 5, MaxJSONDepth} {
			if got, want := jsonDepthExceeds(b, limit), deepest > limit; got != want {
				t.Fatalf("jsonDepthExceeds(%q, %d) = %v, but the depth is %d", b, limit, got, deepest)
			}
		}
	})
}
