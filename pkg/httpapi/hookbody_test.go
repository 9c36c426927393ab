package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime/multipart"
	"net/textproto"
	"reflect"
	"strings"
	"testing"
)

// allBytes is a body no text encoding survives: every byte value.
func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// multipartForm builds a form with two fields (one repeated) and a binary
// file, as browsers and curl -F send it.
func multipartForm(t *testing.T) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("name", "Ada")
	_ = mw.WriteField("tag", "a")
	_ = mw.WriteField("tag", "b")
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="upload"; filename="blob.bin"`)
	h.Set("Content-Type", "application/octet-stream")
	pw, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = pw.Write(allBytes())
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), buf.Bytes()
}

// TestWorkflowHookBodyTypes: each body type reaches the run as docs/flows.md
// ("Bodies") says, byte for byte, through a real HTTP receiver; the signature is
// checked on the raw bytes; a VERIFY_SIGNATURE step verifies a binary body.
func TestWorkflowHookBodyTypes(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	sig := `,"signature":{"header":"X-Sig","prefix":"sha256=","secret":"s3cret"}`
	steps := `[{"name":"v","type":"VERIFY_SIGNATURE","signature":{"header":"X-Sig","prefix":"sha256=","secret":"s3cret"}},
		{"name":"s","type":"SET","values":{"file":"{{ len(trigger.files) > 0 ? trigger.files[0].filename : '' }}","b64":"{{ trigger.bodyBase64 }}"}}]`
	id := h.activeFlow(t, h.key, workflowFlow("types", "POST", sig, steps))
	formType, form := multipartForm(t)
	tests := []struct {
		name, contentType string
		body              []byte
		wantBody          string
		wantB64           bool
		wantFiles         int
	}{
		{"form", "application/x-www-form-urlencoded", []byte("a=1&b=x+y&b=%26"), `{"a":"1","b":["x y","&"]}`, false, 0},
		{"multipart", formType, form, `{"name":"Ada","tag":["a","b"]}`, false, 1},
		{"text", "text/plain; charset=utf-8", []byte("héllo\nworld"), `"héllo\nworld"`, false, 0},
		{"xml", "application/xml", []byte(`<a x="1">é</a>`), `"<a x=\"1\">é</a>"`, false, 0},
		{"soap+xml", "application/soap+xml", []byte(`<e/>`), `"<e/>"`, false, 0},
		{"binary", "application/octet-stream", allBytes(), `null`, true, 0},
		{"image", "image/png", append([]byte("\x89PNG\r\n\x1a\n"), allBytes()...), `null`, true, 0},
		{"latin-1 text", "text/plain; charset=iso-8859-1", []byte("caf\xe9"), `null`, true, 0},
		{"no type", "", []byte("raw"), `null`, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, h.workflow, "POST", "/webhook/types", "", string(tt.body),
				"Content-Type: "+tt.contentType, "X-Sig: sha256="+hmacHex("s3cret", string(tt.body)))
			runID := r.started(t)
			drain(t, h.svc, h.runs)
			run := h.run(t, id, runID)
			var g, w any
			_ = json.Unmarshal(run.Trigger.Body, &g)
			_ = json.Unmarshal([]byte(tt.wantBody), &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("body = %s, want %s", run.Trigger.Body, tt.wantBody)
			}
			if tt.wantB64 {
				if b, err := base64.StdEncoding.DecodeString(run.Trigger.BodyBase64); err != nil || !bytes.Equal(b, tt.body) {
					t.Errorf("bodyBase64 does not hold the body: %q", run.Trigger.BodyBase64)
				}
			}
			if len(run.Trigger.Files) != tt.wantFiles {
				t.Fatalf("files = %+v", run.Trigger.Files)
			}
			if tt.wantFiles > 0 {
				f := run.Trigger.Files[0]
				b, _ := base64.StdEncoding.DecodeString(f.Base64)
				if f.Field != "upload" || f.Filename != "blob.bin" || f.ContentType != "application/octet-stream" ||
					f.Size != 256 || !bytes.Equal(b, allBytes()) {
					t.Errorf("file = %+v", f)
				}
			}
			if run.Status != "SUCCEEDED" {
				t.Fatalf("run %s: %s (steps %+v)", run.Status, run.Error, run.Steps)
			}
			var out map[string]string
			_ = json.Unmarshal(run.Steps[1].Output, &out)
			if tt.wantFiles > 0 && out["file"] != "blob.bin" || tt.wantB64 && out["b64"] != run.Trigger.BodyBase64 {
				t.Errorf("steps see %v", out)
			}
		})
	}
	// A wrong signature over a binary body is refused before any run.
	before := h.runs.count()
	call(t, h.workflow, "POST", "/webhook/types", "", string(allBytes()),
		"Content-Type: application/octet-stream", "X-Sig: sha256="+hmacHex("s3cret", "other")).wantError(t, 401, "")
	call(t, h.workflow, "POST", "/webhook/types", "", "--x\r\nbroken",
		"Content-Type: multipart/form-data; boundary=x", "X-Sig: sha256="+hmacHex("s3cret", "--x\r\nbroken")).wantError(t, 400, "INVALID_MULTIPART")
	if h.runs.count() != before {
		t.Errorf("refused deliveries made runs")
	}
}

// TestFlowBuilderTakesEveryBodyType: the flow builder receiver reads a
// body as the workflow builder does (GitHub's default deliveries are
// forms), and still takes JSON with no Content-Type.
func TestFlowBuilderTakesEveryBodyType(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	id := h.activeFlow(t, h.key, `{"name":"fb","engine":"FLOW_BUILDER","steps":[]}`)
	for _, tt := range []struct{ ct, body string }{
		{"application/x-www-form-urlencoded", `payload=%7B%22ref%22%3A%22main%22%7D`},
		{"text/plain", `hello`},
		{"application/octet-stream", "\x00\x01"},
		{"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--x--\r\n"},
		{"application/cloudevents+json", `{"a":1}`},
	} {
		call(t, h.engine, "POST", "/api/v1/webhooks/"+id, "", tt.body, "Content-Type: "+tt.ct).started(t)
	}
	call(t, h.engine, "POST", "/api/v1/webhooks/"+id, "", `{"a":`, "Content-Type: application/json").wantError(t, 400, "INVALID_JSON")
	r := plainCall(t, "POST", h.engine.URL+"/api/v1/webhooks/"+id, "", `{"a":1}`)
	if r.status != 200 || !strings.Contains(string(r.body), "RUNNING") {
		t.Errorf("no Content-Type: %d %s", r.status, r.body)
	}
}
