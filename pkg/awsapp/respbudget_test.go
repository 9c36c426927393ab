package awsapp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// A run whose step outputs total 8 MiB is cut to the budget: the largest
// outputs' values become markers whose href selects them, and the rest is
// as it was.
func TestFitResponse(t *testing.T) {
	steps := []map[string]any{}
	for i := range 4 {
		steps = append(steps, map[string]any{"name": "s" + string(rune('a'+i)), "output": map[string]string{"v": strings.Repeat("x", 2<<20)}})
	}
	steps = append(steps, map[string]any{"name": "small", "output": map[string]string{"v": "<b>ok</b>"}})
	body, _ := json.Marshal(map[string]any{"id": "run_1", "steps": steps})
	resp := events.APIGatewayProxyResponse{StatusCode: 200, Body: string(body)}
	fitResponse(&resp, "/api/v1/flows/f/runs/run_1", "")
	if n := responseSize(&resp); n > ResponseBudget {
		t.Fatalf("answer %d bytes after the cut, budget %d", n, ResponseBudget)
	}
	var got struct {
		ID    string
		Steps []struct {
			Name   string
			Output map[string]any
		}
	}
	if err := json.Unmarshal([]byte(resp.Body), &got); err != nil || got.ID != "run_1" || len(got.Steps) != 5 {
		t.Fatalf("cut answer %.300s (%v)", resp.Body, err)
	}
	cut := 0
	for i, st := range got.Steps {
		if m, ok := st.Output["v"].(map[string]any); ok && m["truncated"] == true {
			cut++
			ptr := "/steps/" + string(rune('0'+i)) + "/output/v"
			if m["part"] != ptr || m["href"] != "/api/v1/flows/f/runs/run_1?part="+strings.ReplaceAll(ptr, "/", "%2F") || m["bytes"] != float64(2<<20+3) {
				t.Errorf("marker %v, want part %s", m, ptr)
			}
		}
	}
	if cut < 2 || cut > 3 || got.Steps[4].Output["v"] != "<b>ok</b>" {
		t.Errorf("%d outputs cut, small output %v; want the fewest large ones cut", cut, got.Steps[4].Output)
	}

	// A body that is not JSON and too large becomes an error envelope.
	big := events.APIGatewayProxyResponse{StatusCode: 200, Body: strings.Repeat("<p>", 2<<20)}
	fitResponse(&big, "/x", "")
	if big.StatusCode != 500 || !strings.Contains(big.Body, "RESPONSE_TOO_LARGE") {
		t.Errorf("non-JSON answer over the budget: %d %.100s", big.StatusCode, big.Body)
	}
}

// A part is selected by its pointer; a string part answers in pieces, and
// a pointer or offset that names nothing is a 400 naming the parameter.
func TestSelectPart(t *testing.T) {
	body := `{"trigger": {"body": {"html": "` + strings.Repeat("a", StringPieceBytes+10) + `"}}, "n": 1}` + "\n"
	sel := func(ptr string, offset int) events.APIGatewayProxyResponse {
		resp := events.APIGatewayProxyResponse{StatusCode: 200, Body: body}
		selectPart(&resp, "/r", ptr, offset)
		return resp
	}
	var p struct {
		Value string
		Next  *string
		Bytes int
	}
	first := sel("/trigger/body/html", 0)
	if err := json.Unmarshal([]byte(first.Body), &p); err != nil || len(p.Value) != StringPieceBytes || p.Next == nil || p.Bytes != StringPieceBytes+10 {
		t.Fatalf("first piece: %d bytes, next %v (%v)", len(p.Value), p.Next, err)
	}
	if *p.Next != "/r?part=%2Ftrigger%2Fbody%2Fhtml&offset="+itoa(StringPieceBytes) {
		t.Errorf("next %s", *p.Next)
	}
	p.Next = nil
	last := sel("/trigger/body/html", StringPieceBytes)
	if err := json.Unmarshal([]byte(last.Body), &p); err != nil || p.Value != "aaaaaaaaaa" || p.Next != nil {
		t.Errorf("last piece %q next %v (%v)", p.Value, p.Next, err)
	}
	if obj := sel("/trigger", 0); !strings.HasPrefix(obj.Body, `{"body":{"html":"aaa`) {
		t.Errorf("object part %.60s", obj.Body)
	}
	for _, c := range []struct {
		ptr    string
		offset int
		field  string
	}{{"/nope", 0, "part"}, {"/trigger/body/html", -1, "offset"}, {"/trigger/body/html", StringPieceBytes + 11, "offset"}} {
		r := sel(c.ptr, c.offset)
		if r.StatusCode != 400 || !strings.Contains(r.Body, `"field":"`+c.field+`"`) {
			t.Errorf("%s offset %d: %d %s, want 400 naming %s", c.ptr, c.offset, r.StatusCode, r.Body, c.field)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// unescapeHTML turns the three HTML escapes back into their characters,
// and nothing else: an escaped backslash before "u003c" stays.
func TestUnescapeHTML(t *testing.T) {
	in := `{"a":"\u003cb\u003e \u0026 \\u003c \n \u00e9 \"q\""}`
	want := `{"a":"<b> & \\u003c \n \u00e9 \"q\""}`
	if got := unescapeHTML(in); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var a, b any
	if json.Unmarshal([]byte(in), &a) != nil || json.Unmarshal([]byte(want), &b) != nil || a.(map[string]any)["a"] != b.(map[string]any)["a"] {
		t.Error("not the same JSON value")
	}
}
