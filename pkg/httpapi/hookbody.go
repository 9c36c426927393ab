package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"strings"
	"unicode/utf8"

	"flowservice/pkg/automation"
)

// decodeHookBody is parseHookBody as the domain's acceptance takes it.
func decodeHookBody(contentType string, raw []byte) (automation.DecodedBody, error) {
	hb, err := parseHookBody(contentType, raw)
	if err != nil {
		return automation.DecodedBody{}, err
	}
	return automation.DecodedBody{Body: hb.body, Files: hb.files, Base64: hb.base64}, nil
}

// maxFormParts bounds the parts of a multipart body (and the keys of a
// form): each costs more than its bytes.
const maxFormParts = 1000

// hookBody is a workflow builder body as the run keeps it: body is
// trigger.body; files and base64 are trigger.files and trigger.bodyBase64.
type hookBody struct {
	body   json.RawMessage
	files  []automation.TriggerFile
	base64 string
}

// parseHookBody reads a body by its content type (docs/flows.md), never
// losing a byte: JSON as parsed (invalid: 400), a URL-encoded form as an
// object (repeated keys: arrays), multipart/form-data as an object of its
// fields plus its files, text/* and XML as a string when it is UTF-8, and
// anything else (or text that is not UTF-8) as base64 with body null. No
// body is null.
func parseHookBody(contentType string, raw []byte) (hookBody, error) {
	if len(raw) == 0 {
		return hookBody{body: json.RawMessage("null")}, nil
	}
	mt, params, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		if err := checkDepth(raw); err != nil {
			return hookBody{}, err
		}
		if !json.Valid(raw) {
			return hookBody{}, invalidJSON("the webhook body is not valid JSON")
		}
		if err := checkNumbers(raw); err != nil {
			return hookBody{}, err
		}
		return hookBody{body: json.RawMessage(raw)}, nil
	case mt == "application/x-www-form-urlencoded":
		vals, err := url.ParseQuery(string(raw))
		if err != nil || len(vals) > maxFormParts || !utf8.Valid(raw) {
			return hookBody{}, automation.InvalidCode("INVALID_FORM", "the webhook body is not a valid URL-encoded form")
		}
		return formBody(vals, nil)
	case mt == "multipart/form-data":
		return multipartBody(raw, params["boundary"])
	case (strings.HasPrefix(mt, "text/") || mt == "application/xml" || strings.HasSuffix(mt, "+xml")) && utf8.Valid(raw):
		b, err := json.Marshal(string(raw))
		return hookBody{body: b}, err
	}
	return hookBody{body: json.RawMessage("null"), base64: base64.StdEncoding.EncodeToString(raw)}, nil
}

// formBody is the object of a form's fields: a string, or an array for a
// repeated key.
func formBody(vals map[string][]string, files []automation.TriggerFile) (hookBody, error) {
	form := make(map[string]any, len(vals))
	for k, vs := range vals {
		if len(vs) == 1 {
			form[k] = vs[0]
		} else {
			form[k] = vs
		}
	}
	b, err := json.Marshal(form)
	return hookBody{body: b, files: files}, err
}

// multipartBody splits a multipart/form-data body into its fields and its
// files. A part with a filename, or whose bytes are not UTF-8 text, is a
// file; its bytes are kept as sent (NextRawPart: no transfer decoding).
func multipartBody(raw []byte, boundary string) (hookBody, error) {
	bad := func() error {
		return automation.InvalidCode("INVALID_MULTIPART", "the webhook body is not valid multipart/form-data (boundary and parts)")
	}
	if boundary == "" {
		return hookBody{}, bad()
	}
	mr := multipart.NewReader(bytes.NewReader(raw), boundary)
	fields := map[string][]string{}
	files := []automation.TriggerFile{}
	for n := 0; ; n++ {
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || n >= maxFormParts {
			return hookBody{}, bad()
		}
		name, filename := part.FormName(), part.FileName()
		ct := part.Header.Get("Content-Type")
		if ct == "" {
			ct = "application/octet-stream"
		}
		if filename != "" {
			// A file goes from the body straight into its base64, with no
			// copy of its bytes between: a large upload costs its base64
			// beside the body, not twice more (docs/reliability.md).
			var b64 strings.Builder
			enc := base64.NewEncoder(base64.StdEncoding, &b64)
			size, err := io.Copy(enc, part)
			if err != nil || enc.Close() != nil {
				return hookBody{}, bad()
			}
			files = append(files, automation.TriggerFile{Field: name, Filename: filename, ContentType: ct,
				Size: size, Base64: b64.String()})
			continue
		}
		data, err := io.ReadAll(part)
		if err != nil {
			return hookBody{}, bad()
		}
		if utf8.Valid(data) {
			fields[name] = append(fields[name], string(data))
			continue
		}
		files = append(files, automation.TriggerFile{
			Field: name, Filename: filename, ContentType: ct,
			Size: int64(len(data)), Base64: base64.StdEncoding.EncodeToString(data),
		})
	}
	if len(files) == 0 {
		files = nil
	}
	return formBody(fields, files)
}
