package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"flowservice/pkg/automation"
)

// MaxBodyBytes bounds a management request body. Flow definitions are the
// largest bodies and are far smaller.
const MaxBodyBytes = 1 << 20

// maxNameInMessage bounds a field name quoted back in an error message.
const maxNameInMessage = 100

// decode reads r's JSON body into v strictly: the media type must be JSON,
// the body at most MaxBodyBytes, exactly one JSON value, and no field v does
// not know, so that a typo in a definition is an error and not a silent
// default. Messages never quote the input's values, which may be
// credentials.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return &automation.Error{Kind: errUnsupportedMedia, Code: "UNSUPPORTED_MEDIA_TYPE",
			Message: "send the body as Content-Type: application/json"}
	}
	if r.Body == nil {
		return emptyBody()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return decodeError(err, nil, v)
	}
	if err := checkDepth(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, body, v)
	}
	// Anything but white space after the value is an error: "{}{}" or "{} x"
	// are not one JSON value.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidJSON("request body holds data after the JSON value; send exactly one JSON object")
	}
	// encoding/json matches field names case-insensitively; the API, like
	// its document, knows only the exact names.
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return invalidJSON("request body is not valid JSON")
	}
	if name, at := inexactKey(doc, reflect.TypeOf(v), ""); name != "" {
		return automation.InvalidCode("UNKNOWN_FIELD", "%sunknown field %q: check its spelling against the API document (names are case-sensitive)", at, clip(name))
	}
	return nil
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// inexactKey returns the first object key in doc that names no field of t
// exactly, or "", and where it is: "steps[1] (notify).headers: " (empty
// at the top level), naming a step by its index and name as the Service's
// messages do. Raw JSON values (definitions' bodies, credentials) are
// free-form and not walked.
func inexactKey(doc any, t reflect.Type, path string) (name, at string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return "", ""
	}
	if n, ok := reflect.Zero(t).Interface().(interface{ JSONValue() any }); ok { // automation.Nullable
		return inexactKey(doc, reflect.TypeOf(n.JSONValue()), path)
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := doc.(map[string]any)
		if !ok {
			return "", ""
		}
		if n, ok := obj["name"].(string); ok && strings.HasSuffix(path, "]") {
			path += " (" + clip(n) + ")"
		}
		for k, val := range obj {
			f, ok := fieldByTag(t, k)
			if !ok {
				if path != "" {
					return k, path + ": "
				}
				return k, ""
			}
			if name, at := inexactKey(val, f.Type, joinPath(path, clip(k))); name != "" {
				return name, at
			}
		}
	case reflect.Slice, reflect.Array:
		arr, _ := doc.([]any)
		for i, el := range arr {
			if name, at := inexactKey(el, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); name != "" {
				return name, at
			}
		}
	case reflect.Map:
		obj, _ := doc.(map[string]any)
		for k, val := range obj {
			if name, at := inexactKey(val, t.Elem(), joinPath(path, clip(k))); name != "" {
				return name, at
			}
		}
	}
	return "", ""
}

func joinPath(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// fieldByTag finds the exported field of t whose JSON name is exactly name.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// decodeError turns a decoder error into a client error that names the
// position or field but quotes no value. body (nil when unread) gives a
// syntax error its line and column and an unknown field its path; v is
// what the body was decoded into.
func decodeError(err error, body []byte, v any) error {
	var (
		tooLarge *http.MaxBytesError
		syntax   *json.SyntaxError
		typ      *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		return bodyTooLarge()
	case errors.Is(err, io.EOF):
		return emptyBody()
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalidJSON("request body is not valid JSON: it ends before the value is complete")
	case errors.As(err, &syntax):
		// SyntaxError's text quotes the offending character; the position
		// says where without echoing the input.
		line, col := automation.JSONPosition(body, syntax.Offset)
		return invalidJSON(fmt.Sprintf("request body is not valid JSON: syntax error at line %d, column %d (byte offset %d)",
			line, col, syntax.Offset))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalidJSON(fmt.Sprintf("request body must be a JSON object, got %s", jsonKind(typ.Value)))
		}
		return automation.InvalidCode("INVALID_FIELD", "field %q must be %s, got %s",
			clip(typ.Field), jsonType(typ.Type), jsonKind(typ.Value))
	}
	// encoding/json has no type for unknown fields; its message is
	// `json: unknown field "name"`, quoting only the field's name. The walk
	// over the body says where it is.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		at := ""
		var doc any
		if body != nil && json.Unmarshal(body, &doc) == nil {
			_, at = inexactKey(doc, reflect.TypeOf(v), "")
		}
		return automation.InvalidCode("UNKNOWN_FIELD", "%sunknown field %s: check its spelling against the API document", at, clip(name))
	}
	return invalidJSON("request body is not valid JSON")
}

func invalidJSON(msg string) error { return automation.InvalidCode("INVALID_JSON", "%s", msg) }

func emptyBody() error {
	return invalidJSON("request body is empty: send a JSON object")
}

func bodyTooLarge() error {
	return &automation.Error{Kind: errTooLarge, Code: "BODY_TOO_LARGE",
		Message: fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes)}
}

// jsonKind reduces UnmarshalTypeError.Value ("string", "number 5", ...) to
// the kind of value, dropping the number itself.
func jsonKind(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	return kind
}

// jsonType names the JSON type a Go type decodes from.
func jsonType(t reflect.Type) string {
	if t == nil {
		return "a valid value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonType(t.Elem())
	}
	return "a valid value"
}

// clip bounds a client-chosen name quoted in a message.
func clip(s string) string {
	if len(s) > maxNameInMessage {
		return s[:maxNameInMessage] + "…"
	}
	return s
}
