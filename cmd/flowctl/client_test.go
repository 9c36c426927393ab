package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
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

// TestRateLimitedIsWaitedOut: a 429 RATE_LIMITED answer is sent again after
// the wait its Retry-After asks for (at most maxRetryAfter), at most
// rateRetries times; a 429 QUOTA_EXCEEDED is an error at once.
func TestRateLimitedIsWaitedOut(t *testing.T) {
	refuse := 0 // how many requests to refuse before answering
	code, after := "RATE_LIMITED", "3"
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		if requests <= refuse {
			w.Header().Set("Retry-After", after)
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"code":"`+code+`","message":"slow down","requestId":"r1"}}`)
			return
		}
		io.WriteString(w, `{"data":[],"hasMore":false}`)
	}))
	defer srv.Close()
	c, err := newClient(srv.URL, "k")
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	get := func() error {
		requests, waits = 0, nil
		_, err := c.do(context.Background(), http.MethodGet, "/api/v1/flows", nil, nil, nil)
		return err
	}

	refuse = 2
	if err := get(); err != nil || requests != 3 || !slices.Equal(waits, []time.Duration{3 * time.Second, 3 * time.Second}) {
		t.Errorf("two 429s then 200: err %v, %d requests, waits %v; want success after waiting 3s twice", err, requests, waits)
	}
	refuse, after = 100, "120"
	var ae *apiError
	if err := get(); !errors.As(err, &ae) || ae.Code != "RATE_LIMITED" || requests != rateRetries+1 || len(waits) != rateRetries || waits[0] != maxRetryAfter {
		t.Errorf("429 every time: err %v, %d requests, waits %v; want RATE_LIMITED after %d waits of %v", err, requests, waits, rateRetries, maxRetryAfter)
	}
	refuse, code = 100, "QUOTA_EXCEEDED"
	if err := get(); !errors.As(err, &ae) || ae.Code != "QUOTA_EXCEEDED" || requests != 1 || len(waits) != 0 {
		t.Errorf("429 QUOTA_EXCEEDED: err %v, %d requests, waits %v; want the error at once", err, requests, waits)
	}
}
