package respbudget

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
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
	out, size, ok := b.Fit(nil, body, "/api/v1/flows/f/runs/run_1")
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
	if _, _, ok := b.Fit(nil, []byte(strings.Repeat("<p>", 2<<20)), "/x"); ok {
		t.Error("a text answer over the budget was fitted")
	}
}

// Size measures the answer: a budget whose measure counts each byte twice
// cuts more.
func TestFitMeasure(t *testing.T) {
	body, _ := json.Marshal(map[string]any{"a": strings.Repeat("x", 100<<10), "b": strings.Repeat("y", 80<<10), "c": "z"})
	double := Budget{Bytes: 256 << 10, Size: func(_ http.Header, b []byte) int { return 2 * len(b) }}
	out, size, ok := double.Fit(nil, body, "/r")
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
		out, _, err := b.Part(nil, body, "/r", Request{Part: ptr, Offset: offset})
		return out, err
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
		{"/trigger", "2", "offset"}, {"/trigger", "x", "offset"}, {"/n", "0", "offset"},
	} {
		_, err := sel(c.ptr, c.offset)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != c.param || !strings.HasPrefix(err.Error(), c.param+": ") {
			t.Errorf("%s offset %s: %v, want an error naming %s", c.ptr, c.offset, err, c.param)
		}
	}
	if _, _, err := b.Part(nil, []byte("<p>"), "/r", Request{Part: "/a"}); err == nil {
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

// A part of many mid-sized elements is cut in a few rounds (one encoding
// each), not one encoding per element cut. Counted in measures, not timed.
func TestFitManyParts(t *testing.T) {
	items := make([]any, 4000)
	for i := range items {
		items[i] = map[string]any{"id": i, "text": strings.Repeat("t", 1500)}
	}
	// The part /trigger/body holds 4,000 items of 1.5 KB: its items are
	// cut, largest first, about 3,400 of them.
	body, _ := json.Marshal(map[string]any{"trigger": map[string]any{"body": items}})
	b := Budget{Bytes: 1 << 20}
	encodings := 0
	b.Size = func(_ http.Header, out []byte) int { encodings++; return len(out) }
	out, size, err := b.Part(nil, body, "/r", Request{Part: "/trigger/body"})
	if err != nil || size > b.Bytes {
		t.Fatalf("%v, %d bytes over a budget of %d", err, size, b.Bytes)
	}
	if encodings > 4 {
		t.Errorf("%d measures of the answer; want a few rounds, not one per cut", encodings)
	}
	var got struct{ Value []any }
	if err := json.Unmarshal(out, &got); err != nil || len(got.Value) != 4000 {
		t.Fatalf("cut answer: %v", err)
	}
	whole := 0
	for i, it := range got.Value {
		m := it.(map[string]any)
		if m["truncated"] != true {
			whole++
		} else if m["part"] != "/trigger/body/"+strconv.Itoa(i) {
			t.Fatalf("item %d: marker %v", i, m)
		}
	}
	if whole == 0 || whole > 700 {
		t.Errorf("%d items left whole; want the answer filled up to its budget", whole)
	}
}

// A 6 MB array of small numbers and a 6 MB object of small members, which
// no marker can shrink, answer in slices that give them back whole; each
// slice is one decoding and a bounded number of encodings, so reading the
// part costs O(parts) encodings (it was one encoding of the whole answer
// per element, which never finished). Counted in measures, not timed.
func TestPartSlices(t *testing.T) {
	nums := make([]any, 3_000_000)
	for i := range nums {
		nums[i] = json.Number(strconv.Itoa(i % 10))
	}
	obj := map[string]any{}
	for i := 0; i < 500_000; i++ {
		obj["k"+strconv.Itoa(i)] = json.Number(strconv.Itoa(i % 100))
	}
	b := Default()
	encodings := 0
	b.Size = func(_ http.Header, out []byte) int { encodings++; return len(out) }
	for _, c := range []struct {
		name  string
		value any
	}{{"array", nums}, {"object", obj}} {
		body := encodeJSON(map[string]any{"id": "run_1", "trigger": map[string]any{"body": c.value}})
		if len(body) <= b.Bytes {
			t.Fatalf("%s: %d bytes, want over the budget", c.name, len(body))
		}
		// The whole answer: the body cut.
		encodings = 0
		whole, _, ok := b.Fit(nil, body, "/r")
		var run struct{ Trigger struct{ Body Marker } }
		if err := json.Unmarshal(whole, &run); !ok || err != nil || run.Trigger.Body.Href != "/r?part=%2Ftrigger%2Fbody" || encodings > 2 {
			t.Fatalf("%s: whole answer %.200s (ok %v, %d measures, %v)", c.name, whole, ok, encodings, err)
		}
		// Its slices, following next.
		var arr []any
		members := map[string]any{}
		req, slices := Request{Part: "/trigger/body"}, 0
		encodings = 0
		for {
			slices++
			out, size, err := b.Part(nil, body, "/r", req)
			dec := json.NewDecoder(strings.NewReader(string(out)))
			dec.UseNumber()
			var sl PartSlice
			if err := errors.Join(err, dec.Decode(&sl)); err != nil || size > b.Bytes || sl.Part != req.Part || sl.Truncated != (sl.Next != nil) {
				t.Fatalf("%s slice %d: %d bytes, %+v (%v)", c.name, slices, size, sl.Next, err)
			}
			switch v := sl.Value.(type) {
			case []any:
				if sl.Offset != len(arr) || sl.Count != len(nums) {
					t.Fatalf("slice at %d of %d, want at %d of %d", sl.Offset, sl.Count, len(arr), len(nums))
				}
				arr = append(arr, v...)
			case map[string]any:
				if sl.Offset != len(members) || sl.Count != len(obj) {
					t.Fatalf("slice at %d of %d, want at %d of %d", sl.Offset, sl.Count, len(members), len(obj))
				}
				for k, x := range v {
					members[k] = x
				}
			}
			if sl.Next == nil {
				break
			}
			req.Offset = (*sl.Next)[strings.LastIndex(*sl.Next, "=")+1:]
		}
		var back any = arr
		if c.name == "object" {
			back = members
		}
		if !reflect.DeepEqual(back, c.value) {
			t.Errorf("%s: the slices do not give the part back", c.name)
		}
		// 5 MB in slices of at most SliceBytes: a handful, each measured
		// a bounded number of times (the whole part once, when there is
		// no offset, then the slice).
		if max := len(body)/b.SliceBytes() + 2; slices > max || encodings > 2*slices+1 {
			t.Errorf("%s: %d slices (at most %d), %d measures", c.name, slices, max, encodings)
		}
	}
}

// An element of a slice too large itself is cut by a marker that points
// at its index in the whole part, not in the slice.
func TestPartSliceMarkers(t *testing.T) {
	b := Budget{Bytes: 8 << 10}
	elems := []any{}
	for range 3000 {
		elems = append(elems, json.Number("1"))
	}
	elems = append(elems, strings.Repeat("x", 10<<10))
	body := encodeJSON(map[string]any{"a": elems})
	out, _, err := b.Part(nil, body, "/r", Request{Part: "/a", Offset: "3000"})
	var sl struct {
		Offset int
		Value  []Marker
	}
	if err := errors.Join(err, json.Unmarshal(out, &sl)); err != nil || sl.Offset != 3000 || len(sl.Value) != 1 || sl.Value[0].Part != "/a/3000" {
		t.Fatalf("%.300s (%v)", out, err)
	}
}
