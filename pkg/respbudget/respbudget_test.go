package respbudget

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// A run whose step outputs total 8 MiB is cut to the budget: the largest
// outputs' values become markers whose href selects them, and the rest is
// as it was.
func TestFit(t *testing.T) {
	steps := []map[string]any{}
	for i := range 4 {
		steps = append(steps, map[string]any{"name": "s" + string(rune('a'+i)), "output": map[string]string{"v": strings.Repeat("x", 2<<20)}})
	}
	steps = append(steps, map[string]any{"name": "small", "output": map[string]string{"v": "<b>ok</b>"}})
	body, _ := json.Marshal(map[string]any{"id": "run_1", "steps": steps})
	b := Default()
	out, size, ok := b.Fit(nil, body, "/api/v1/flows/f/runs/run_1", false, "")
	if !ok || size != len(out) || size > b.Bytes {
		t.Fatalf("answer %d bytes after the cut (ok %v), budget %d", size, ok, b.Bytes)
	}
	var got struct {
		ID    string
		Steps []struct {
			Name   string
			Output map[string]any
		}
	}
	if err := json.Unmarshal(out, &got); err != nil || got.ID != "run_1" || len(got.Steps) != 5 {
		t.Fatalf("cut answer %.300s (%v)", out, err)
	}
	cut := 0
	for i, st := range got.Steps {
		if m, ok := st.Output["v"].(map[string]any); ok && m["truncated"] == true {
			cut++
			ptr := "/steps/" + strconv.Itoa(i) + "/output/v"
			if m["part"] != ptr || m["href"] != "/api/v1/flows/f/runs/run_1?part="+strings.ReplaceAll(ptr, "/", "%2F") || m["bytes"] != float64(2<<20+2) {
				t.Errorf("marker %v, want part %s", m, ptr)
			}
		}
	}
	if cut < 2 || cut > 3 || got.Steps[4].Output["v"] != "<b>ok</b>" {
		t.Errorf("%d outputs cut, small output %v; want the fewest large ones cut", cut, got.Steps[4].Output)
	}

	// A body that is not JSON cannot be cut.
	if _, _, ok := b.Fit(nil, []byte(strings.Repeat("<p>", 2<<20)), "/x", false, ""); ok {
		t.Error("a text answer over the budget was fitted")
	}
	// Nor can a string piece, which is never cut from itself.
	piece, _ := json.Marshal(PartPiece{Part: "/s", Value: strings.Repeat("x", 200)})
	if _, _, ok := (Budget{Bytes: 100}).Fit(nil, piece, "/x", true, "/s"); ok {
		t.Error("a piece over the budget was cut")
	}
}

// Size measures the answer: a budget whose measure counts each byte twice
// cuts more.
func TestFitMeasure(t *testing.T) {
	body, _ := json.Marshal(map[string]any{"a": strings.Repeat("x", 100<<10), "b": strings.Repeat("y", 80<<10), "c": "z"})
	double := Budget{Bytes: 256 << 10, Size: func(_ http.Header, b []byte) int { return 2 * len(b) }}
	out, size, ok := double.Fit(nil, body, "/r", false, "")
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil || !ok || size != 2*len(out) || size > double.Bytes {
		t.Fatalf("ok %v size %d (%v)", ok, size, err)
	}
	if _, cutA := got["a"].(map[string]any); !cutA || got["b"] != strings.Repeat("y", 80<<10) {
		t.Errorf("want a cut and b whole: %.200s", out)
	}
}

// A part is selected by its pointer; a string part answers in pieces, and
// a pointer or offset that names nothing is a ParamError naming the
// parameter.
func TestSelect(t *testing.T) {
	b := Budget{Bytes: 8 << 10}
	n := b.PieceBytes()
	html := strings.Repeat("a", n-1) + "é" + strings.Repeat("a", 9) // é straddles the first cut
	body, _ := json.Marshal(map[string]any{"trigger": map[string]any{"body": map[string]any{"html": html}}, "n": 1, "a/b": []int{7}})
	sel := func(ptr, offset string) ([]byte, error) {
		return b.Select(body, "/r", Request{Part: ptr, Offset: offset})
	}
	var p PartPiece
	first, err := sel("/trigger/body/html", "")
	if err := errors.Join(err, json.Unmarshal(first, &p)); err != nil || len(p.Value) != n-1 || p.Next == nil || !p.Truncated || p.Bytes != len(html) {
		t.Fatalf("first piece: %d bytes, next %v (%v)", len(p.Value), p.Next, err)
	}
	if *p.Next != "/r?part=%2Ftrigger%2Fbody%2Fhtml&offset="+strconv.Itoa(n-1) {
		t.Errorf("next %s", *p.Next)
	}
	last, err := sel("/trigger/body/html", strconv.Itoa(n-1))
	if err := errors.Join(err, json.Unmarshal(last, &p)); err != nil || p.Value != "é"+strings.Repeat("a", 9) || p.Next != nil || p.Truncated || p.Offset != n-1 {
		t.Errorf("last piece %q next %v (%v)", p.Value, p.Next, err)
	}
	if !strings.Contains(string(last), `"next":null`) {
		t.Errorf("last piece %s: want next null", last)
	}
	var v PartValue
	obj, err := sel("/trigger", "")
	if err := errors.Join(err, json.Unmarshal(obj, &v)); err != nil || v.Part != "/trigger" || v.Value.(map[string]any)["body"] == nil {
		t.Errorf("object part %.60s (%v)", obj, err)
	}
	if esc, err := sel("/a~1b/0", ""); err != nil || string(esc) != `{"part":"/a~1b/0","value":7}`+"\n" {
		t.Errorf("escaped pointer: %s (%v)", esc, err)
	}
	for _, c := range []struct{ ptr, offset, param string }{
		{"/nope", "", "part"}, {"trigger", "", "part"}, {"/a~1b/00", "", "part"}, {"/n/x", "", "part"},
		{"/trigger/body/html", "-1", "offset"}, {"/trigger/body/html", "x", "offset"},
		{"/trigger/body/html", strconv.Itoa(len(html) + 1), "offset"}, {"/trigger/body/html", strconv.Itoa(n), "offset"},
		{"/trigger", "1", "offset"},
	} {
		_, err := sel(c.ptr, c.offset)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != c.param || !strings.HasPrefix(err.Error(), c.param+": ") {
			t.Errorf("%s offset %s: %v, want an error naming %s", c.ptr, c.offset, err, c.param)
		}
	}
	if _, err := b.Select([]byte("<p>"), "/r", Request{Part: "/a"}); err == nil {
		t.Error("a part of a text answer")
	}
}

// jsonSize, which picks what to cut, agrees with encoding/json on every
// kind of character.
func TestJSONSize(t *testing.T) {
	for _, s := range []string{"", "plain", `"\`, "\b\f\n\r\t", "\x00\x01\x1f", "<>&", "é\u2028\u2029", "\xff\xfe", "a\xc3", strings.Repeat("ü", 9)} {
		v := map[string]any{"k" + s: []any{s, true, false, nil, json.Number("1.5e3")}}
		if got, want := jsonSize(v), len(encodeJSON(v))-1; got != want || !utf8.ValidString(string(encodeJSON(s))) {
			t.Errorf("%q: jsonSize %d, encoded %d", s, got, want)
		}
	}
}

// UnescapeHTML turns the three HTML escapes back into their characters,
// and nothing else: an escaped backslash before "u003c" stays.
func TestUnescapeHTML(t *testing.T) {
	in := `{"a":"\u003cb\u003e \u0026 \\u003c \n \u00e9 \"q\" \u003C"}`
	want := `{"a":"<b> & \\u003c \n \u00e9 \"q\" <"}`
	if got := string(UnescapeHTML([]byte(in))); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var a, b any
	if json.Unmarshal([]byte(in), &a) != nil || json.Unmarshal([]byte(want), &b) != nil || a.(map[string]any)["a"] != b.(map[string]any)["a"] {
		t.Error("not the same JSON value")
	}
}

// An answer of many mid-sized parts is cut in a few rounds (one encoding
// each), and a part that is a large array of tiny elements, which no cut
// can shrink, is refused at once rather than cut an element at a time:
// both were an encoding of the whole answer per element cut, which never
// finished for a 3 MB array. Counted in rounds and cuts, not timed.
func TestFitManyParts(t *testing.T) {
	items := make([]any, 4000)
	for i := range items {
		items[i] = map[string]any{"id": i, "text": strings.Repeat("t", 1500)}
	}
	// The part /trigger/body itself (never cut) holds 4,000 items of
	// 1.5 KB: its items are cut, largest first, about 3,400 of them.
	body, _ := json.Marshal(PartValue{Part: "/trigger/body", Value: items})
	b := Budget{Bytes: 1 << 20}
	encodings := 0
	b.Size = func(_ http.Header, out []byte) int { encodings++; return len(out) }
	out, size, ok := b.Fit(nil, body, "/r", true, "/trigger/body")
	if !ok || size > b.Bytes {
		t.Fatalf("ok %v, %d bytes over a budget of %d", ok, size, b.Bytes)
	}
	if encodings > 4 {
		t.Errorf("%d measures of the answer; want a few rounds, not one per cut", encodings)
	}
	var got struct{ Value []any }
	if err := json.Unmarshal(out, &got); err != nil || len(got.Value) != 4000 {
		t.Fatalf("cut answer: %v", err)
	}
	whole := 0
	for _, it := range got.Value {
		if m := it.(map[string]any); m["truncated"] != true {
			whole++
		}
	}
	if whole == 0 || whole > 700 {
		t.Errorf("%d items left whole; want the answer filled up to its budget", whole)
	}

	tiny := make([]any, 1_000_000)
	for i := range tiny {
		tiny[i] = i % 10
	}
	part, _ := json.Marshal(PartValue{Part: "/trigger/body", Value: tiny})
	encodings = 0
	if _, _, ok := b.Fit(nil, part, "/r", true, "/trigger/body"); ok || encodings > 1 {
		t.Errorf("a 2 MB array of digits: ok %v after %d measures; want it refused after the first", ok, encodings)
	}
}
