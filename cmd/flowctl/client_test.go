package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRemoteErrors: answers that are not the API's envelope still give a
// message naming the server, and the key never appears in one.
func TestRemoteErrors(t *testing.T) {
	const key = "fsk_unit-test-key-never-shown"
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"envelope", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"error":{"code":"FLOW_MODIFIED","message":"changed meanwhile","requestId":"r1"}}`)
		}, "FLOW_MODIFIED: changed meanwhile (request r1)"},
		{"proxy page", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html>\n<body>Bad Gateway</body></html>")
		}, "GET http://SRV/api/v1/flows: HTTP 502: <html> <body>Bad Gateway</body></html>"},
		{"not JSON on success", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "hello")
		}, "GET http://SRV/api/v1/flows: unexpected answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotAuth string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotAuth = r.Header.Get("Authorization")
				tt.handler(w, r)
			}))
			defer srv.Close()
			var out, errb bytes.Buffer
			root := newRoot(strings.NewReader(""), &out, &errb)
			root.SetArgs([]string{"--url", srv.URL, "--api-key", key, "--data-dir", t.TempDir(), "flows", "list"})
			err := root.Execute()
			want := strings.ReplaceAll(tt.want, "http://SRV", srv.URL)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want it to contain %q", err, want)
			}
			if strings.Contains(err.Error()+out.String()+errb.String(), key) {
				t.Errorf("the key appears in %q / %q / %q", err, out.String(), errb.String())
			}
			if gotAuth != "Bearer "+key {
				t.Errorf("Authorization = %q", gotAuth)
			}
		})
	}
}

// TestAllFollowsCursors: --all asks for every page once and shows every item.
func TestAllFollowsCursors(t *testing.T) {
	var cursors []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.URL.Query().Get("cursor")
		cursors = append(cursors, c)
		w.Header().Set("Content-Type", "application/json")
		switch c {
		case "":
			io.WriteString(w, `{"data":[{"id":"con_a","name":"A"}],"cursor":"p2","hasMore":true}`)
		case "p2":
			io.WriteString(w, `{"data":[{"id":"con_b","name":"B"}],"cursor":null,"hasMore":false}`)
		default:
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":"INVALID_CURSOR","message":"bad cursor","requestId":"r"}}`)
		}
	}))
	defer srv.Close()
	var out bytes.Buffer
	root := newRoot(strings.NewReader(""), &out, io.Discard)
	root.SetArgs([]string{"--url", srv.URL, "--api-key", "k", "connections", "list", "--all", "--limit", "1"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(cursors, ",") != ",p2" || !strings.Contains(out.String(), "con_a") || !strings.Contains(out.String(), "con_b") {
		t.Errorf("cursors asked %q, output:\n%s", cursors, out.String())
	}
}

func TestInitialKeyOnlyForThisMachine(t *testing.T) {
	for url, want := range map[string]bool{
		"http://127.0.0.1:8080": true, "http://localhost:8080": true, "http://[::1]:8080": true,
		"https://flows.example.com": false, "http://10.0.0.5:8080": false, "not a url\x7f": false,
	} {
		if got := isLoopback(url); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", url, got, want)
		}
	}
}
