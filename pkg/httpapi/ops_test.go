package httpapi

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

func TestHealthz(t *testing.T) {
	var down bool
	base, _ := newTestServer(t)
	srv := serve(t, NewAPI(base.svc, nil, WithHealth(func(context.Context) error {
		if down {
			return errors.New("database is locked")
		}
		return nil
	})))

	var h struct{ Status string }
	call(t, srv, "GET", "/healthz", "", "").into(t, http.StatusOK, &h)
	if h.Status != "ok" {
		t.Errorf("status %q, want ok", h.Status)
	}
	down = true
	r := call(t, srv, "GET", "/healthz", "", "")
	e := r.wantError(t, http.StatusServiceUnavailable, "STORE_UNAVAILABLE")
	if r.header.Get("Retry-After") == "" || e.Message == "database is locked" {
		t.Errorf("503 %v %q: want Retry-After and no internals", r.header, e.Message)
	}
	call(t, srv, "POST", "/healthz", "", "").wantError(t, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
}

func TestMetricsRoute(t *testing.T) {
	srv, _ := newTestServer(t)
	call(t, srv, "GET", "/metrics", "", "").wantError(t, http.StatusNotFound, "NOT_FOUND")

	with := serve(t, NewAPI(srv.svc, nil, WithMetrics(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0ken" {
			w.Header().Set("WWW-Authenticate", "Bearer")
			WriteError(w, r, http.StatusUnauthorized, "UNAUTHORIZED", "no")
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("flowd_up 1\n"))
	}))))
	call(t, with, "GET", "/metrics", "", "").wantError(t, http.StatusUnauthorized, "UNAUTHORIZED")
	r := call(t, with, "GET", "/metrics", "", "", "Authorization: Bearer t0ken")
	if r.status != 200 || string(r.body) != "flowd_up 1\n" {
		t.Errorf("GET /metrics = %d %s", r.status, r.body)
	}
}
