// Package respbudget fits the management API's JSON answers to a size
// budget, the same way on every backend: an answer over it has its largest
// parts replaced by markers that point to them,
//
//	{"truncated": true, "bytes": 4160002, "part": "/trigger/body",
//	 "href": "/api/v1/flows/flw_…/runs/run_…?part=%2Ftrigger%2Fbody"}
//
// and a GET naming a part (the part and offset query parameters) answers
// that part alone, itself cut the same way, a string in pieces of at most
// Budget.PieceBytes with the href of the next, and an array or object too
// large to be cut (its elements too small) in slices of elements. docs/api.md "Large answers"
// describes it for clients.
//
// Only how an answer is measured differs between backends (Budget.Size):
// flowd counts the body; Lambda counts the proxy response, the body escaped
// again inside it. The package knows nothing of either.
package respbudget

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DefaultBytes is the budget of every backend: Lambda refuses answers over
// 6 MiB, and flowd cuts at the same figure so that a client sees the same
// answers from both.
const DefaultBytes = 5 << 20

// PartMediaType is the Content-Type of an answer to ?part=: the part is
// not the operation's usual representation (a Run, a Flow), so clients and
// the API document tell the two apart by type, not by guessing from the
// shape.
const PartMediaType = "application/vnd.flowservice.part+json"

// Query parameters the budget owns: the handlers never see them.
const (
	PartParam   = "part"
	OffsetParam = "offset"
)

// leafSize is the size under which a part is never cut alone: its parent
// is cut instead, so that an answer loses a few large parts rather than
// many small ones.
const leafSize = 64 << 10

// Budget is the most an answer may take.
type Budget struct {
	// Bytes is the budget, as Size measures an answer.
	Bytes int
	// Size measures an answer as the backend returns it; nil: the body's
	// length.
	Size func(h http.Header, body []byte) int
}

// Default is flowd's budget: DefaultBytes of body.
func Default() Budget { return Budget{Bytes: DefaultBytes} }

// PieceBytes is the size of one piece of a string part too large for one
// answer: a byte of a string takes at most 6 bytes as JSON (\u001f), and 7
// escaped again inside a Lambda proxy response, so a piece always fits.
func (b Budget) PieceBytes() int { return b.Bytes / 8 }

// Measure is the size of an answer as the budget counts it.
func (b Budget) Measure(h http.Header, body []byte) int {
	if b.Size == nil {
		return len(body)
	}
	return b.Size(h, body)
}

// Request is a request for one part of an answer.
type Request struct {
	// Part is a JSON pointer (RFC 6901) into the whole answer.
	Part string
	// Offset is the offset parameter as sent; "" for none.
	Offset string
}

// Take removes the part and offset parameters from q and returns them; ok
// reports whether either was there.
func Take(q url.Values) (req Request, ok bool) {
	_, hasPart := q[PartParam]
	_, hasOffset := q[OffsetParam]
	req = Request{Part: q.Get(PartParam), Offset: q.Get(OffsetParam)}
	q.Del(PartParam)
	q.Del(OffsetParam)
	return req, hasPart || hasOffset
}

// ParamError is a part or offset that names nothing in the answer: a 400
// naming the parameter.
type ParamError struct {
	Param   string
	Message string
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Message }

// PartValue is the answer to a request for a part that is not a string.
type PartValue struct {
	Part  string `json:"part"`
	Value any    `json:"value"`
}

// PartPiece is the answer to a request for a string part: the bytes from
// Offset on, at most PieceBytes of them; Bytes is the whole string's
// length and Next the href of the next piece (nil at the end).
type PartPiece struct {
	Part      string  `json:"part"`
	Offset    int     `json:"offset"`
	Bytes     int     `json:"bytes"`
	Value     string  `json:"value"`
	Truncated bool    `json:"truncated"`
	Next      *string `json:"next"`
}

// Marker stands for a part cut from an answer.
type Marker struct {
	Truncated bool   `json:"truncated"`
	Bytes     int    `json:"bytes"`
	Part      string `json:"part"`
	Href      string `json:"href"`
}

// PartSlice is the answer to a request for an array or object part that
// cannot be cut to the budget as a whole, its elements being too small to
// be cut alone (a batch webhook's array of numbers): the elements (an
// array's, or an object's members in the order of their keys, byte-wise)
// from index Offset on, as many as fill a slice (Budget.SliceBytes of
// JSON); Count is how many the whole part holds and Next the href of the
// next slice (nil at the end). Value is an array or an object, cut as any
// answer is: its markers point into the whole answer.
type PartSlice struct {
	Part      string  `json:"part"`
	Offset    int     `json:"offset"`
	Count     int     `json:"count"`
	Value     any     `json:"value"`
	Truncated bool    `json:"truncated"`
	Next      *string `json:"next"`
}

// SliceBytes is the most JSON the elements of one PartSlice take: JSON
// text escaped again (Lambda's measure) takes at most twice its size, so
// a slice always fits.
func (b Budget) SliceBytes() int { return b.Bytes / 4 }

// TooLargeError is an answer that cannot be cut to the budget (not JSON,
// or nothing left to cut): Size is its size as the budget measures it.
type TooLargeError struct{ Size int }

func (e *TooLargeError) Error() string {
	return "the answer is " + strconv.Itoa(e.Size) + " bytes and cannot be cut into parts"
}

// Part answers req from body, the whole answer served at path, fitted to
// the budget: the part req names as a PartValue; a string as a PartPiece;
// an array or object that cannot be cut to fit (or given an offset) as a
// PartSlice. Markers in it point into the whole answer. A part or offset
// that names nothing is a *ParamError; an answer that cannot fit a
// *TooLargeError. h is the answer's header, for Size. Each call decodes
// the answer at most twice and encodes the part a bounded number of times
// (Fit's rounds), whatever its number of elements.
func (b Budget) Part(h http.Header, body []byte, path string, req Request) (out []byte, size int, err error) {
	root, err := decodeJSON(body)
	if err != nil {
		return nil, 0, &ParamError{PartParam, "this answer is not JSON and has no parts"}
	}
	v, ok := lookup(root, req.Part)
	if !ok {
		return nil, 0, &ParamError{PartParam, "no part " + strconv.Quote(req.Part) + " in this answer (a JSON pointer such as /trigger/body)"}
	}
	inWhole := func(rel string) string { return req.Part + rel }
	switch t := v.(type) {
	case string:
		piece, err := b.piece(t, path, req)
		if err != nil {
			return nil, 0, err
		}
		out = encodeJSON(piece)
		if size = b.Measure(h, out); size > b.Bytes {
			return nil, size, &TooLargeError{size}
		}
		return out, size, nil
	case []any, map[string]any:
		if req.Offset == "" {
			whole := map[string]any{"part": req.Part, "value": v}
			out, size := encodeJSON(whole), 0
			if size = b.Measure(h, out); size <= b.Bytes {
				return out, size, nil
			}
			// With nothing in it worth cutting (a large array of
			// numbers), it answers in slices at once.
			if len(heaviest(v, 1)) > 0 {
				if out, size, ok := b.fit(h, whole, out, size, "/value", path, inWhole); ok {
					return out, size, nil
				}
				// Its elements are too small to be cut alone. The failed
				// fit left markers in v; decode it again.
				root, _ = decodeJSON(body)
				v, _ = lookup(root, req.Part)
			}
		}
		return b.slice(h, v, path, req)
	default:
		if req.Offset != "" {
			return nil, 0, &ParamError{OffsetParam, "offset applies to a string, array or object part only; " + strconv.Quote(req.Part) + " is none of them"}
		}
		out = encodeJSON(PartValue{Part: req.Part, Value: v})
		if size = b.Measure(h, out); size > b.Bytes {
			return nil, size, &TooLargeError{size}
		}
		return out, size, nil
	}
}

// piece is the PartPiece of the string s at req.Offset.
func (b Budget) piece(s, path string, req Request) (PartPiece, error) {
	offset := 0
	if req.Offset != "" {
		n, err := strconv.Atoi(req.Offset)
		switch {
		case err != nil || n < 0:
			return PartPiece{}, &ParamError{OffsetParam, "offset must be a whole number of bytes"}
		case n > len(s):
			return PartPiece{}, &ParamError{OffsetParam, "offset is past the end of the part (" + strconv.Itoa(len(s)) + " bytes)"}
		case n < len(s) && !utf8.RuneStart(s[n]):
			return PartPiece{}, &ParamError{OffsetParam, "offset " + strconv.Itoa(n) + " is inside a character"}
		}
		offset = n
	}
	out := PartPiece{Part: req.Part, Offset: offset, Bytes: len(s), Value: s[offset:]}
	if n := b.PieceBytes(); len(out.Value) > n {
		for n > 0 && !utf8.RuneStart(out.Value[n]) {
			n--
		}
		next := Href(path, req.Part) + "&" + OffsetParam + "=" + strconv.Itoa(offset+n)
		out.Value, out.Truncated, out.Next = out.Value[:n], true, &next
	}
	return out, nil
}

// slice answers the PartSlice of v, an array or object, at req.Offset:
// one pass over the elements it holds, one fit.
func (b Budget) slice(h http.Header, v any, path string, req Request) ([]byte, int, error) {
	var keys []string
	var elems []any
	switch t := v.(type) {
	case []any:
		elems = t
	case map[string]any:
		keys = make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys) // encoding/json's order of a map's keys
	}
	count := len(elems) + len(keys)
	offset := 0
	if req.Offset != "" {
		n, err := strconv.Atoi(req.Offset)
		switch {
		case err != nil || n < 0:
			return nil, 0, &ParamError{OffsetParam, "offset must be a whole number of elements for an array or object part"}
		case n > count:
			return nil, 0, &ParamError{OffsetParam, "offset is past the end of the part (" + strconv.Itoa(count) + " elements)"}
		}
		offset = n
	}
	end, used := offset, 0
	for end < count {
		var n int
		if keys == nil {
			n = jsonSize(elems[end]) + 1
		} else {
			n = quotedLen(keys[end]) + 2 + jsonSize(v.(map[string]any)[keys[end]])
		}
		// At least one element, however large: fit cuts inside it.
		if end > offset && used+n > b.SliceBytes() {
			break
		}
		used += n
		end++
	}
	answer := map[string]any{"part": req.Part, "offset": offset, "count": count, "truncated": end < count, "next": nil}
	if end < count {
		answer["next"] = Href(path, req.Part) + "&" + OffsetParam + "=" + strconv.Itoa(end)
	}
	inWhole := func(rel string) string { return req.Part + rel }
	if keys == nil {
		answer["value"] = append([]any(nil), elems[offset:end]...)
		// The slice's index i is the part's offset+i.
		inWhole = func(rel string) string {
			i := strings.IndexByte(rel[1:], '/') + 1
			if i == 0 {
				i = len(rel)
			}
			n, _ := strconv.Atoi(rel[1:i])
			return req.Part + "/" + strconv.Itoa(offset+n) + rel[i:]
		}
	} else {
		m := make(map[string]any, end-offset)
		for _, k := range keys[offset:end] {
			m[k] = v.(map[string]any)[k]
		}
		answer["value"] = m
	}
	out, size, ok := b.fit(h, answer, nil, 0, "/value", path, inWhole)
	if !ok {
		return nil, size, &TooLargeError{size}
	}
	return out, size, nil
}

// Href is the href of the part at pointer of the answer served at path.
func Href(path, pointer string) string {
	return path + "?" + PartParam + "=" + url.QueryEscape(pointer)
}

// Fit cuts body, a whole JSON answer served at path, to the budget: its
// largest parts are replaced by Markers until it fits. h is the answer's
// header, for Size. It returns the answer and its size; ok is false when
// the answer cannot fit (not JSON, or nothing left to cut).
func (b Budget) Fit(h http.Header, body []byte, path string) (out []byte, size int, ok bool) {
	size = b.Measure(h, body)
	if size <= b.Bytes {
		return body, size, true
	}
	root, err := decodeJSON(body)
	if err != nil {
		return body, size, false
	}
	out, size, ok = b.fit(h, root, body, size, "", path, func(rel string) string { return rel })
	if !ok {
		return body, size, false
	}
	return out, size, true
}

// fit cuts root, under the pointer within (never within itself), until it
// fits, and returns its encoding; body and size are root's encoding and
// its measure when the caller has them (nil: encoded here). inWhole makes a cut part's pointer
// (relative to within) the pointer its marker names in the whole answer.
// Each round cuts, largest first, as many parts as free the excess, then
// encodes once: an answer of many parts is cut in a few rounds, not one
// encoding per part.
func (b Budget) fit(h http.Header, root any, body []byte, size int, within, path string, inWhole func(rel string) string) ([]byte, int, bool) {
	if body == nil {
		body = encodeJSON(root)
		size = b.Measure(h, body)
	}
	for size > b.Bytes {
		sub, _ := lookup(root, within)
		// The excess in bytes of the body: the measure may count a byte
		// more than once (Lambda's escapes it again).
		excess := int(int64(size-b.Bytes)*int64(len(body))/int64(size)) + 1
		cuts := heaviest(sub, excess)
		if len(cuts) == 0 {
			return body, size, false
		}
		for _, c := range cuts {
			p := inWhole(c.ptr)
			root = replace(root, within+c.ptr, Marker{Truncated: true, Bytes: c.n, Part: p, Href: Href(path, p)})
		}
		body = encodeJSON(root)
		size = b.Measure(h, body)
	}
	return body, size, true
}

// minCut is the smallest part worth cutting: a marker takes up to about
// 200 bytes (more with a long path), so a smaller part frees nothing. An
// answer made only of parts this small (a large array of numbers, as the
// root of a part) cannot be cut, and says so at once.
const minCut = 512

// markerCost is what a marker is counted to take when choosing the cuts of
// a round; a round that falls short is followed by another.
const markerCost = 256

type cut struct {
	ptr string
	n   int
}

// heaviest returns the parts of v (pointers relative to v, with their
// JSON sizes) to cut to free excess bytes: the largest first among those
// that are a leaf or hold only parts under leafSize (cutting such a part
// loses the least structure for the bytes it frees), at least minCut
// bytes each, none inside another. v itself is never chosen, nor a marker
// already there. Empty when nothing is worth cutting.
func heaviest(v any, excess int) []cut {
	var cands []cut
	var walk func(v any, ptr string) int
	walk = func(v any, ptr string) int {
		if _, isMarker := v.(Marker); isMarker {
			return jsonSize(v)
		}
		n, leafish := 0, true
		switch t := v.(type) {
		case map[string]any:
			n = 2 + max(len(t)-1, 0)
			for k, c := range t {
				cn := walk(c, ptr+"/"+escapePointer(k))
				n += quotedLen(k) + 1 + cn
				if cn >= leafSize {
					leafish = false
				}
			}
		case []any:
			n = 2 + max(len(t)-1, 0)
			for i, c := range t {
				cn := walk(c, ptr+"/"+strconv.Itoa(i))
				n += cn
				if cn >= leafSize {
					leafish = false
				}
			}
		default:
			n = jsonSize(v)
		}
		if leafish && ptr != "" && n >= minCut {
			cands = append(cands, cut{ptr, n})
		}
		return n
	}
	walk(v, "")
	// Larger first; a part is larger than any part inside it, so an
	// ancestor is always considered before its descendants.
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].n != cands[j].n {
			return cands[i].n > cands[j].n
		}
		return cands[i].ptr < cands[j].ptr // deterministic among equals
	})
	chosen := map[string]bool{}
	var out []cut
	freed := 0
	for _, c := range cands {
		if freed >= excess {
			break
		}
		if insideChosen(c.ptr, chosen) {
			continue
		}
		chosen[c.ptr] = true
		out = append(out, c)
		freed += c.n - markerCost
	}
	return out
}

// insideChosen tells whether one of ptr's ancestors is chosen.
func insideChosen(ptr string, chosen map[string]bool) bool {
	for i := strings.LastIndex(ptr, "/"); i > 0; i = strings.LastIndex(ptr[:i], "/") {
		if chosen[ptr[:i]] {
			return true
		}
	}
	return false
}

// jsonSize is the length of v as encodeJSON writes it, without the
// newline, for the values decodeJSON makes.
func jsonSize(v any) int {
	switch t := v.(type) {
	case nil:
		return 4
	case bool:
		if t {
			return 4
		}
		return 5
	case json.Number:
		return len(t)
	case string:
		return quotedLen(t)
	case map[string]any:
		n := 2 + max(len(t)-1, 0)
		for k, c := range t {
			n += quotedLen(k) + 1 + jsonSize(c)
		}
		return n
	case []any:
		n := 2 + max(len(t)-1, 0)
		for _, c := range t {
			n += jsonSize(c)
		}
		return n
	default:
		return len(encodeJSON(v)) - 1
	}
}

// quotedLen is the length of s as encoding/json quotes it without HTML
// escaping: short escapes for \ " \b \f \n \r \t, \u00XX for the other
// control bytes, \ufffd for each invalid byte, \u2028 and \u2029 escaped.
func quotedLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

func lookup(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = unescapePointer(tok)
		switch t := v.(type) {
		case map[string]any:
			c, ok := t[tok]
			if !ok {
				return nil, false
			}
			v = c
		case []any:
			// RFC 6901: array indexes are decimal without leading zeros.
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) || strconv.Itoa(i) != tok {
				return nil, false
			}
			v = t[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// replace sets the node at ptr (which exists and is not the root) to nv.
func replace(root any, ptr string, nv any) any {
	i := strings.LastIndex(ptr, "/")
	parent, _ := lookup(root, ptr[:i])
	tok := unescapePointer(ptr[i+1:])
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

func unescapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// encodeJSON writes v as the API's answers are written: with <, > and &
// as themselves, and a newline.
func encodeJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return buf.Bytes()
}

// UnescapeHTML rewrites the escapes \u003c, \u003e and \u0026 in a JSON
// text as <, > and &: the same JSON, a sixth of the size for those
// characters. Stored run documents hold them escaped (encoding/json's
// default); the answer need not.
func UnescapeHTML(s []byte) []byte {
	if !bytes.Contains(s, []byte(`\u00`)) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b = append(b, c)
			continue
		}
		if s[i+1] == 'u' && i+5 < len(s) {
			if c, ok := htmlChar(s[i+2 : i+6]); ok {
				b = append(b, c)
				i += 5
				continue
			}
		}
		// Any other escape, \\ included, is copied whole.
		b = append(b, c, s[i+1])
		i++
	}
	return b
}

// htmlChar is the character of the HTML escape \u<code>.
func htmlChar(code []byte) (byte, bool) {
	for _, e := range []struct {
		code string
		c    byte
	}{{"003c", '<'}, {"003e", '>'}, {"0026", '&'}} {
		if strings.EqualFold(string(code), e.code) {
			return e.c, true
		}
	}
	return 0, false
}
