package awsapp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// ResponseBudget is the most bytes an HTTP function's answer may take as
// Lambda returns it: the proxy response as JSON, the body inside it as a
// string (escaped again). Lambda refuses answers over 6 MiB (6,291,556
// bytes, Function.ResponseSizeTooLarge) and ends the runtime: the client
// gets a 502 and the next request a cold start. The budget leaves room for
// the headers.
//
// An answer over it is cut (fitResponse): the largest parts of its JSON
// body are replaced by a pointer to themselves,
//
//	{"truncated": true, "bytes": 4160000, "part": "/trigger/body",
//	 "href": "/api/v1/flows/flw_…/runs/run_…?part=/trigger/body"}
//
// and GET href answers that part alone (itself cut the same way, a string
// in pieces of at most StringPieceBytes with a next href). docs/aws.md
// "Response size" describes it.
const ResponseBudget = 5 << 20

// StringPieceBytes is the size of one piece of a string part too large for
// one answer: escaped twice (once in the body, once in the proxy response)
// a byte takes at most 7 bytes, so a piece always fits ResponseBudget.
const StringPieceBytes = ResponseBudget / 8

// Query parameters the budget owns: the handlers never see them.
const (
	partParam   = "part"
	offsetParam = "offset"
)

// takePart removes the part and offset parameters from a GET request and
// returns them.
func takePart(ev *events.APIGatewayProxyRequest) (part string, offset int, ok bool) {
	if !strings.EqualFold(ev.HTTPMethod, http.MethodGet) && !strings.EqualFold(ev.HTTPMethod, http.MethodHead) {
		return "", 0, false
	}
	part, ok = ev.QueryStringParameters[partParam]
	if !ok {
		if v := ev.MultiValueQueryStringParameters[partParam]; len(v) > 0 {
			part, ok = v[0], true
		}
	}
	if !ok {
		return "", 0, false
	}
	off := ev.QueryStringParameters[offsetParam]
	if v := ev.MultiValueQueryStringParameters[offsetParam]; off == "" && len(v) > 0 {
		off = v[0]
	}
	offset = -1
	if off == "" {
		offset = 0
	} else if n, err := strconv.Atoi(off); err == nil && n >= 0 {
		offset = n
	}
	for _, m := range []map[string]string{ev.QueryStringParameters} {
		delete(m, partParam)
		delete(m, offsetParam)
	}
	for _, m := range []map[string][]string{ev.MultiValueQueryStringParameters} {
		delete(m, partParam)
		delete(m, offsetParam)
	}
	return part, offset, true
}

// responseSize is the size of resp as the runtime returns it (the lambda
// package encodes it without HTML escaping: see the functions' main).
func responseSize(resp *events.APIGatewayProxyResponse) int {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		return 0
	}
	return buf.Len()
}

// selectPart makes resp's JSON body the part at pointer (a JSON pointer,
// RFC 6901), a string's bytes from offset on. A part that is not there is
// a 400 naming the parameter.
func selectPart(resp *events.APIGatewayProxyResponse, path, pointer string, offset int) {
	if resp.StatusCode != http.StatusOK || resp.IsBase64Encoded {
		return
	}
	if offset < 0 {
		partError(resp, offsetParam, "offset must be a whole number of bytes")
		return
	}
	root, err := decodeJSON(resp.Body)
	if err != nil {
		partError(resp, partParam, "this answer has no parts")
		return
	}
	v, ok := lookup(root, pointer)
	if !ok {
		partError(resp, partParam, "no part "+strconv.Quote(pointer)+" in this answer")
		return
	}
	if s, isString := v.(string); isString && offset > 0 {
		if offset > len(s) {
			partError(resp, offsetParam, "offset is past the end of the part ("+strconv.Itoa(len(s))+" bytes)")
			return
		}
		v = s[offset:]
	}
	if _, isString := v.(string); isString {
		piece(resp, path, pointer, offset, v)
		return
	}
	resp.Body = encodeJSON(v)
}

// piece answers a string part as {"part", "offset", "bytes", "value",
// "truncated", "next"}: one piece of it (starting at offset of the whole),
// with the href of the next in next when there is more.
//
// piece answers one piece of the string part v (starting at offset of the
// whole), with the href of the next when there is more.
func piece(resp *events.APIGatewayProxyResponse, path, pointer string, offset int, v any) {
	s, ok := v.(string)
	if !ok {
		return
	}
	n := len(s)
	out := map[string]any{"part": pointer, "offset": offset, "bytes": offset + n, "next": nil}
	if n > StringPieceBytes {
		cut := StringPieceBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		out["value"], out["truncated"] = s[:cut], true
		out["next"] = partHref(path, pointer) + "&" + offsetParam + "=" + strconv.Itoa(offset+cut)
	} else {
		out["value"], out["truncated"] = s, false
	}
	resp.Body = encodeJSON(out)
}

func partError(resp *events.APIGatewayProxyResponse, field, msg string) {
	resp.StatusCode = http.StatusBadRequest
	resp.Body = encodeJSON(map[string]any{"error": map[string]string{
		"code": "INVALID_PARAMETER", "message": field + ": " + msg, "field": field,
	}})
}

// unescapeHTML rewrites the escapes \u003c, \u003e and \u0026 in a JSON
// text as <, > and &: the same JSON, a sixth of the size for those
// characters. Stored run documents hold them escaped (encoding/json's
// default); the answer need not.
func unescapeHTML(s string) string {
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		if s[i+1] == 'u' && i+5 < len(s) {
			switch strings.ToLower(s[i+2 : i+6]) {
			case "003c":
				b.WriteByte('<')
				i += 5
				continue
			case "003e":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			}
		}
		// Any other escape, \\ included, is copied whole.
		b.WriteByte(c)
		b.WriteByte(s[i+1])
		i++
	}
	return b.String()
}

// isJSON reports whether resp's body is JSON by its Content-Type.
func isJSON(resp *events.APIGatewayProxyResponse) bool {
	ct := http.Header(resp.MultiValueHeaders).Get("Content-Type")
	for k, v := range resp.Headers {
		if strings.EqualFold(k, "Content-Type") {
			ct = v
		}
	}
	return !resp.IsBase64Encoded && strings.HasPrefix(ct, "application/json")
}

// fitResponse cuts resp to ResponseBudget. A JSON body loses its largest
// parts, each replaced by a pointer to it, until the answer fits; any other
// body that cannot fit becomes a 500 RESPONSE_TOO_LARGE envelope, which
// Lambda returns, instead of an answer Lambda would refuse.
func fitResponse(resp *events.APIGatewayProxyResponse, path, base string) {
	size := responseSize(resp)
	if size <= ResponseBudget {
		return
	}
	var root any
	var err error
	if !resp.IsBase64Encoded && resp.StatusCode < 300 {
		root, err = decodeJSON(resp.Body)
	}
	if resp.IsBase64Encoded || resp.StatusCode >= 300 || err != nil {
		tooLarge(resp, size)
		return
	}
	for size > ResponseBudget {
		ptr, n, ok := heaviest(root, "")
		if !ok {
			tooLarge(resp, size)
			return
		}
		marker := map[string]any{"truncated": true, "bytes": n, "part": base + ptr, "href": partHref(path, base+ptr)}
		root = replace(root, ptr, marker)
		resp.Body = encodeJSON(root)
		size = responseSize(resp)
	}
}

func tooLarge(resp *events.APIGatewayProxyResponse, size int) {
	resp.StatusCode, resp.IsBase64Encoded = http.StatusInternalServerError, false
	resp.Body = encodeJSON(map[string]any{"error": map[string]string{
		"code":    "RESPONSE_TOO_LARGE",
		"message": "the answer is " + strconv.Itoa(size) + " bytes, over what Lambda can return",
	}})
	if resp.MultiValueHeaders != nil {
		http.Header(resp.MultiValueHeaders).Set("Content-Type", "application/json")
	}
}

func partHref(path, pointer string) string {
	return path + "?" + partParam + "=" + url.QueryEscape(pointer)
}

// leafSize is the size under which a part is never cut alone: its parent
// is cut instead.
const leafSize = 64 << 10

// heaviest returns the pointer and size of the largest part of v that is
// a leaf or holds only parts under leafSize: cutting it loses the least
// structure for the bytes it frees. The root itself is never chosen.
func heaviest(v any, ptr string) (string, int, bool) {
	var best string
	var bestN int
	var walk func(v any, ptr string) int
	walk = func(v any, ptr string) int {
		n := len(encodeJSON(v))
		leafish := true
		each(v, func(key string, c any) {
			if walk(c, ptr+"/"+escapePointer(key)) >= leafSize {
				leafish = false
			}
		})
		if leafish && ptr != "" && n > bestN {
			best, bestN = ptr, n
		}
		return n
	}
	walk(v, ptr)
	return best, bestN, bestN > 0
}

func each(v any, f func(string, any)) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			f(k, c)
		}
	case []any:
		for i, c := range t {
			f(strconv.Itoa(i), c)
		}
	}
}

func lookup(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch t := v.(type) {
		case map[string]any:
			c, ok := t[tok]
			if !ok {
				return nil, false
			}
			v = c
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			v = t[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// replace sets the node at ptr (which exists) to nv.
func replace(root any, ptr string, nv any) any {
	i := strings.LastIndex(ptr, "/")
	parent, _ := lookup(root, ptr[:i])
	tok := strings.ReplaceAll(strings.ReplaceAll(ptr[i+1:], "~1", "/"), "~0", "~")
	switch t := parent.(type) {
	case map[string]any:
		t[tok] = nv
	case []any:
		n, _ := strconv.Atoi(tok)
		t[n] = nv
	}
	return root
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func decodeJSON(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func encodeJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return buf.String()
}
