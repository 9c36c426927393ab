// Package budgettest checks that a backend cuts large answers as
// pkg/respbudget says, so that flowd (pkg/httpapi's tests, over real HTTP)
// and Lambda (pkg/awsapp's, through the api function's proxy handler on
// moto) are held to the very same assertions.
package budgettest

import (
	"bytes"
	"encoding/json"
	"net/url"
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
		{url.Values{"part": {"/trigger"}, "offset": {"1"}}, "offset"},
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
