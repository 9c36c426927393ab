// Package budgettest checks that a backend cuts large answers as
// pkg/respbudget says, so that flowd (pkg/httpapi's tests, over real HTTP)
// and Lambda (pkg/awsapp's, through the api function's proxy handler on
// moto) are held to the very same assertions.
package budgettest

import (
	"bytes"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"flowservice/pkg/respbudget"
)

// Get answers a GET of path with query on the backend under test, with a
// key that may read the run: its status, Content-Type and body.
type Get func(t *testing.T, path string, query url.Values) (status int, contentType string, body []byte)

// CheckRun checks the answers about the run at runPath, whose trigger body
// is {"html": html} with html longer than budget (the backend's budget,
// which it measures at least as the body's length):
//
//   - the run comes back within the budget, its html replaced by a marker
//     whose href answers it;
//   - following the href and each piece's next gives html back whole, in
//     pieces of at most budget.PieceBytes(), typed respbudget.PartMediaType;
//   - a part that is an object comes back as a PartValue, cut the same way
//     with markers pointing into the whole run;
//   - a part or offset that names nothing is a 400 naming the parameter.
func CheckRun(t *testing.T, get Get, budget respbudget.Budget, runPath, html string) {
	t.Helper()
	if len(html) <= budget.Bytes {
		t.Fatalf("the html (%d bytes) must be over the budget (%d)", len(html), budget.Bytes)
	}
	status, ct, body := get(t, runPath, nil)
	if status != 200 || ct != "application/json" || len(body) > budget.Bytes {
		t.Fatalf("GET %s: %d, %d bytes; want 200 within the budget of %d", runPath, status, len(body), budget.Bytes)
	}
	var run struct {
		ID      string
		Trigger struct {
			Body struct{ HTML json.RawMessage }
		}
	}
	if err := json.Unmarshal(body, &run); err != nil || run.ID == "" {
		t.Fatalf("GET %s: %.300s (%v)", runPath, body, err)
	}
	var marker respbudget.Marker
	if err := json.Unmarshal(run.Trigger.Body.HTML, &marker); err != nil || !marker.Truncated {
		t.Fatalf("trigger.body.html is %.200s, want a marker (%v)", run.Trigger.Body.HTML, err)
	}
	if marker.Part != "/trigger/body/html" || marker.Href != runPath+"?part=%2Ftrigger%2Fbody%2Fhtml" ||
		marker.Bytes != jsonLen(html) {
		t.Errorf("marker %+v, want part /trigger/body/html, href on %s, bytes %d", marker, runPath, jsonLen(html))
	}

	// The string part, piece by piece.
	var sb strings.Builder
	href, pieces := marker.Href, 0
	for href != "" && pieces < 1000 {
		pieces++
		p, q := split(t, href)
		status, ct, body := get(t, p, q)
		var piece respbudget.PartPiece
		if err := json.Unmarshal(body, &piece); status != 200 || ct != respbudget.PartMediaType || err != nil {
			t.Fatalf("GET %s: %d %s %.300s (%v)", href, status, ct, body, err)
		}
		if piece.Part != marker.Part || piece.Offset != sb.Len() || piece.Bytes != len(html) ||
			len(piece.Value) > budget.PieceBytes() || piece.Truncated != (piece.Next != nil) || len(body) > budget.Bytes {
			t.Fatalf("piece %d at %s: part %q offset %d bytes %d, %d bytes of value (piece %d), truncated %v next %v; answer %d bytes",
				pieces, href, piece.Part, piece.Offset, piece.Bytes, len(piece.Value), budget.PieceBytes(), piece.Truncated, piece.Next, len(body))
		}
		sb.WriteString(piece.Value)
		href = ""
		if piece.Next != nil {
			href = *piece.Next
		}
	}
	if sb.String() != html || pieces < 2 {
		t.Errorf("the pieces (%d) give %d bytes back, want the %d of the html", pieces, sb.Len(), len(html))
	}

	// An object part: itself over the budget, so cut, its marker pointing
	// into the whole run.
	status, ct, body = get(t, runPath, url.Values{"part": {"/trigger"}})
	var trig struct {
		Part  string
		Value struct {
			Body struct{ HTML respbudget.Marker }
		}
	}
	if err := json.Unmarshal(body, &trig); status != 200 || ct != respbudget.PartMediaType || err != nil || trig.Part != "/trigger" ||
		trig.Value.Body.HTML.Part != "/trigger/body/html" || trig.Value.Body.HTML.Href != marker.Href {
		t.Errorf("GET ?part=/trigger: %d %.300s (%v)", status, body, err)
	}

	for _, c := range []struct {
		query url.Values
		param string
	}{
		{url.Values{"part": {"/nope"}}, "part"},
		{url.Values{"part": {"trigger"}}, "part"},
		{url.Values{"part": {"/trigger/body/html/x"}}, "part"},
		{url.Values{"part": {"/trigger/body/html"}, "offset": {"x"}}, "offset"},
		{url.Values{"part": {"/trigger/body/html"}, "offset": {"-1"}}, "offset"},
		{url.Values{"part": {"/trigger/body/html"}, "offset": {itoa(len(html) + 1)}}, "offset"},
		{url.Values{"part": {"/trigger"}, "offset": {"1000"}}, "offset"},
		{url.Values{"part": {"/trigger"}, "offset": {"x"}}, "offset"},
		{url.Values{"part": {"/attempts"}, "offset": {"0"}}, "offset"},
	} {
		status, ct, body := get(t, runPath, c.query)
		var e struct {
			Error struct{ Code, Message, RequestID string }
		}
		if err := json.Unmarshal(body, &e); status != 400 || ct != "application/json" || err != nil || e.Error.Code != "INVALID_PARAMETER" ||
			!strings.HasPrefix(e.Error.Message, c.param+": ") || e.Error.RequestID == "" {
			t.Errorf("GET ?%s: %d %s, want 400 INVALID_PARAMETER naming %s", c.query.Encode(), status, body, c.param)
		}
	}
}

// CheckSlices checks that the run at runPath, whose trigger body is body
// (a JSON array or object over the budget, of elements too small to be
// cut alone: a batch webhook's numbers), reads back whole through parts:
// the run within the budget, its body a marker; the marker's href and
// each slice's next answer respbudget.PartSlice values, each within the
// budget, that together are the body; in a number of requests bounded by
// the body's size over budget.SliceBytes(), each a bounded number of
// encodings (measures counts the backend's measures of an answer; nil
// where the test cannot count them).
func CheckSlices(t *testing.T, get Get, budget respbudget.Budget, runPath string, body []byte, measures func() int) {
	t.Helper()
	var want any
	if err := json.Unmarshal(body, &want); err != nil || len(body) <= budget.Bytes {
		t.Fatalf("the body (%d bytes, %v) must be JSON over the budget (%d)", len(body), err, budget.Bytes)
	}
	status, _, answer := get(t, runPath, nil)
	var run struct {
		Trigger struct{ Body respbudget.Marker }
	}
	if err := json.Unmarshal(answer, &run); status != 200 || err != nil || !run.Trigger.Body.Truncated ||
		run.Trigger.Body.Href != runPath+"?part=%2Ftrigger%2Fbody" {
		t.Fatalf("GET %s: %d %.300s (%v)", runPath, status, answer, err)
	}
	start := 0
	if measures != nil {
		start = measures()
	}
	var arr []any
	obj := map[string]any{}
	href, slices := run.Trigger.Body.Href, 0
	for href != "" && slices < 1000 {
		slices++
		p, q := split(t, href)
		status, ct, answer := get(t, p, q)
		var sl respbudget.PartSlice
		if err := json.Unmarshal(answer, &sl); status != 200 || ct != respbudget.PartMediaType || err != nil ||
			sl.Part != "/trigger/body" || sl.Truncated != (sl.Next != nil) || len(answer) > budget.Bytes {
			t.Fatalf("GET %s: %d %s %.300s (%v)", href, status, ct, answer, err)
		}
		switch v := sl.Value.(type) {
		case []any:
			if sl.Offset != len(arr) {
				t.Fatalf("slice %d at %d, want %d", slices, sl.Offset, len(arr))
			}
			arr = append(arr, v...)
		case map[string]any:
			if sl.Offset != len(obj) {
				t.Fatalf("slice %d at %d, want %d", slices, sl.Offset, len(obj))
			}
			for k, x := range v {
				obj[k] = x
			}
		default:
			t.Fatalf("slice %d: value %T", slices, sl.Value)
		}
		href = ""
		if sl.Next != nil {
			href = *sl.Next
		}
	}
	var back any = arr
	if _, isObject := want.(map[string]any); isObject {
		back = obj
	}
	if !reflect.DeepEqual(back, want) {
		t.Errorf("the %d slices do not give the body back", slices)
	}
	if most := len(body)/budget.SliceBytes() + 2; slices < 2 || slices > most {
		t.Errorf("%d slices, want 2 to %d", slices, most)
	}
	// The first request measures the whole part once, then each slice is
	// measured once (markers inside a slice: a few rounds more).
	if measures != nil {
		if n := measures() - start; n > 2*slices+2 {
			t.Errorf("%d measures for %d slices: want O(slices), not one per element", n, slices)
		}
	}
}

func split(t *testing.T, href string) (string, url.Values) {
	t.Helper()
	u, err := url.Parse(href)
	if err != nil {
		t.Fatal(err)
	}
	return u.Path, u.Query()
}

// jsonLen is the length of s as a JSON string in an answer (<, > and &
// unescaped).
func jsonLen(s string) int {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return buf.Len() - 1
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
