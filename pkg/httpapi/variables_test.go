package httpapi

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// secretValue is a secret variable's value; no response may hold it.
const secretValue = "sv-9d81f2c7ab"

func TestVariableLifecycle(t *testing.T) {
	srv, key := newTestServer(t)
	noSecret := func(t *testing.T, r result) {
		t.Helper()
		if bytes.Contains(r.body, []byte(secretValue)) {
			t.Errorf("response holds the secret value: %s", r.body)
		}
	}

	var v automation.Variable
	call(t, srv, "PUT", "/api/v1/variables/BASE_URL", key, `{"value":"https://api.example.com"}`).into(t, http.StatusOK, &v)
	if v.Name != "BASE_URL" || v.Secret || v.Value == nil || *v.Value != "https://api.example.com" || v.Created.IsZero() || !v.Updated.Equal(v.Created) {
		t.Fatalf("put plain = %+v", v)
	}
	created := v.Created

	r := call(t, srv, "PUT", "/api/v1/variables/TOKEN", key, `{"value":"`+secretValue+`","secret":true}`)
	noSecret(t, r)
	if strings.Contains(string(r.body), `"value"`) {
		t.Errorf("a secret variable's answer has a value field: %s", r.body)
	}
	v = automation.Variable{}
	r.into(t, http.StatusOK, &v)
	if v.Name != "TOKEN" || !v.Secret || v.Value != nil {
		t.Fatalf("put secret = %+v", v)
	}
	// The secret value is stored, for runs, where connection credentials are.
	p := projectOfKey(t, srv, key).ID
	rv, err := srv.svc.LoadRunVariables(t.Context(), p)
	if err != nil || rv.Values["TOKEN"] != secretValue || rv.Values["BASE_URL"] != "https://api.example.com" ||
		len(rv.Secrets) != 1 || rv.Secrets[0] != secretValue {
		t.Fatalf("LoadRunVariables = %+v, %v", rv, err)
	}

	// Replacing keeps created and moves updated.
	call(t, srv, "PUT", "/api/v1/variables/BASE_URL", key, `{"value":"https://staging.example.com","secret":false}`).into(t, http.StatusOK, &v)
	if !v.Created.Equal(created) || v.Updated.Before(created) || *v.Value != "https://staging.example.com" {
		t.Errorf("replace = %+v, created %v", v, created)
	}

	r = call(t, srv, "GET", "/api/v1/variables/TOKEN", key, "")
	noSecret(t, r)
	v = automation.Variable{}
	r.into(t, http.StatusOK, &v)
	if !v.Secret || v.Value != nil {
		t.Errorf("get secret = %+v", v)
	}

	r = call(t, srv, "GET", "/api/v1/variables", key, "")
	noSecret(t, r)
	var l automation.List[automation.Variable]
	r.into(t, http.StatusOK, &l)
	if len(l.Data) != 2 || l.Data[0].Name != "BASE_URL" || l.Data[1].Name != "TOKEN" || l.HasMore || l.Cursor != nil {
		t.Errorf("list = %+v", l)
	}

	// A secret made plain loses its stored secret value.
	call(t, srv, "PUT", "/api/v1/variables/TOKEN", key, `{"value":"plain now"}`).into(t, http.StatusOK, &v)
	if rv, err := srv.svc.LoadRunVariables(t.Context(), p); err != nil || rv.Values["TOKEN"] != "plain now" || len(rv.Secrets) != 0 {
		t.Errorf("after making TOKEN plain: %+v, %v", rv, err)
	}

	if r := call(t, srv, "DELETE", "/api/v1/variables/TOKEN", key, ""); r.status != http.StatusNoContent {
		t.Fatalf("delete = %d %s", r.status, r.body)
	}
	call(t, srv, "GET", "/api/v1/variables/TOKEN", key, "").wantError(t, http.StatusNotFound, "VARIABLE_NOT_FOUND")
	call(t, srv, "DELETE", "/api/v1/variables/TOKEN", key, "").wantError(t, http.StatusNotFound, "VARIABLE_NOT_FOUND")

	// Another project sees none of them.
	other := newProjectKey(t, srv, automation.PlanTeam)
	call(t, srv, "GET", "/api/v1/variables/BASE_URL", other, "").wantError(t, http.StatusNotFound, "VARIABLE_NOT_FOUND")
	call(t, srv, "GET", "/api/v1/variables", other, "").into(t, http.StatusOK, &l)
	if len(l.Data) != 0 {
		t.Errorf("another project lists %+v", l.Data)
	}
}

func TestVariableValidation(t *testing.T) {
	srv, key := newTestServer(t)
	tests := []struct {
		name, path, body string
		wantStatus       int
		wantInMessage    string
	}{
		{"digit first", "/api/v1/variables/1ABC", `{"value":"x"}`, 400, "[A-Za-z_]"},
		{"dash", "/api/v1/variables/A-B", `{"value":"x"}`, 400, "[A-Za-z_]"},
		{"65 characters", "/api/v1/variables/" + strings.Repeat("A", 65), `{"value":"x"}`, 400, "{0,63}"},
		{"no value", "/api/v1/variables/A", `{"secret":true}`, 400, "value is required"},
		{"value not a string", "/api/v1/variables/A", `{"value":5}`, 400, "value"},
		{"value too long", "/api/v1/variables/A", `{"value":"` + strings.Repeat("x", 4097) + `"}`, 400, "4096"},
		{"unknown field", "/api/v1/variables/A", `{"value":"x","kind":"y"}`, 400, "kind"},
		{"64 characters", "/api/v1/variables/_" + strings.Repeat("a", 63), `{"value":"` + strings.Repeat("x", 4096) + `"}`, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, srv, "PUT", tt.path, key, tt.body)
			if r.status != tt.wantStatus {
				t.Fatalf("PUT %s = %d %s, want %d", tt.path, r.status, r.body, tt.wantStatus)
			}
			if tt.wantStatus >= 400 {
				if e := r.errorOf(t); !strings.Contains(e.Message, tt.wantInMessage) {
					t.Errorf("message %q, want it to hold %q", e.Message, tt.wantInMessage)
				}
			}
		})
	}
	call(t, srv, "GET", "/api/v1/variables/not-a-name", key, "").wantError(t, http.StatusNotFound, "VARIABLE_NOT_FOUND")
}

func TestVariablePages(t *testing.T) {
	srv, key := newTestServer(t)
	names := []string{"A1", "A2", "B", "C", "_d"}
	for _, n := range []string{"C", "A2", "_d", "A1", "B"} {
		call(t, srv, "PUT", "/api/v1/variables/"+n, key, `{"value":"v"}`).into(t, http.StatusOK, &automation.Variable{})
	}
	var got []string
	cursor := ""
	for range 10 {
		path := "/api/v1/variables?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var l automation.List[automation.Variable]
		call(t, srv, "GET", path, key, "").into(t, http.StatusOK, &l)
		for _, v := range l.Data {
			got = append(got, v.Name)
		}
		if !l.HasMore {
			break
		}
		cursor = *l.Cursor
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("pages = %v, want %v", got, names)
	}
	call(t, srv, "GET", "/api/v1/variables?limit=0", key, "").wantError(t, http.StatusBadRequest, "INVALID_PARAMETER")
	call(t, srv, "GET", "/api/v1/variables?cursor=forged", key, "").wantError(t, http.StatusBadRequest, "")
}
