package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func scrape(t *testing.T, h http.Handler, auth string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func refuse(w http.ResponseWriter, _ *http.Request, status int, code, _ string) {
	w.WriteHeader(status)
	_, _ = io.WriteString(w, code)
}

func TestReceiverOutcomes(t *testing.T) {
	m := New()
	statuses := []int{200, 200, 400, 401, 404, 413, 503, 500}
	i := 0
	h := m.Receiver("flow_builder", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(statuses[i])
		i++
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for range statuses {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	_, body := scrape(t, m.Handler(HandlerOptions{Open: true, Refuse: refuse}), "")
	for _, want := range []string{
		`flowd_webhooks_received_total{outcome="accepted",receiver="flow_builder"} 2`,
		`flowd_webhooks_received_total{outcome="invalid",receiver="flow_builder"} 1`,
		`flowd_webhooks_received_total{outcome="unauthorized",receiver="flow_builder"} 1`,
		`flowd_webhooks_received_total{outcome="not_found",receiver="flow_builder"} 1`,
		`flowd_webhooks_received_total{outcome="too_large",receiver="flow_builder"} 1`,
		`flowd_webhooks_received_total{outcome="unavailable",receiver="flow_builder"} 1`,
		`flowd_webhooks_received_total{outcome="failed",receiver="flow_builder"} 1`,
		"process_resident_memory_bytes",
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestHandlerAccess(t *testing.T) {
	m := New()
	tests := []struct {
		name       string
		opts       HandlerOptions
		auth       string
		wantStatus int
	}{
		{"open on loopback", HandlerOptions{Open: true}, "", 200},
		{"no token, not loopback", HandlerOptions{}, "", 403},
		{"token missing", HandlerOptions{Token: "s3cret", Open: true}, "", 401},
		{"token wrong", HandlerOptions{Token: "s3cret"}, "Bearer s3cre", 401},
		{"token in another scheme", HandlerOptions{Token: "s3cret"}, "Basic s3cret", 401},
		{"token right", HandlerOptions{Token: "s3cret"}, "Bearer s3cret", 200},
		{"scheme case-insensitive", HandlerOptions{Token: "s3cret"}, "bearer s3cret", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Refuse = refuse
			status, body := scrape(t, m.Handler(tt.opts), tt.auth)
			if status != tt.wantStatus {
				t.Errorf("status %d, want %d (%.80s)", status, tt.wantStatus, body)
			}
			if status == 200 && !strings.Contains(body, "flowd_store_latency_seconds") && !strings.Contains(body, "go_goroutines") {
				t.Errorf("200 without metrics: %.200s", body)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:80": true, "localhost:1": true, "127.0.0.2:1": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "[::]:80": false, "example.com:80": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestOpenMetricsCheckHost: open metrics answer a request that names
// loopback as its Host, and refuse one that names anything else (a page
// that rebinds its own name to 127.0.0.1), unless it brings the token.
func TestOpenMetricsCheckHost(t *testing.T) {
	m := New()
	for _, tt := range []struct {
		host, auth string
		opts       HandlerOptions
		want       int
	}{
		{"127.0.0.1:8080", "", HandlerOptions{Open: true}, 200},
		{"localhost", "", HandlerOptions{Open: true}, 200},
		{"LOCALHOST:9", "", HandlerOptions{Open: true}, 200},
		{"[::1]:8080", "", HandlerOptions{Open: true}, 200},
		{"attacker.example:8080", "", HandlerOptions{Open: true}, 403},
		{"127.0.0.1.attacker.example", "", HandlerOptions{Open: true}, 403},
		{"attacker.example", "Bearer s3cret", HandlerOptions{Token: "s3cret", Open: true}, 200},
	} {
		srv := httptest.NewServer(m.Handler(HandlerOptions{Token: tt.opts.Token, Open: tt.opts.Open, Refuse: refuse}))
		req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
		req.Host = tt.host
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := srv.Client().Do(req)
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Host %q: status %d, want %d", tt.host, resp.StatusCode, tt.want)
		}
	}
}
