package dashboard

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRootRedirect(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"NOT_FOUND"}}`))
	})
	h := RootRedirect(api, nil)
	tests := []struct {
		name, method, path, accept string
		wantStatus                 int
		wantLocation               string
	}{
		{"browser", "GET", "/", "text/html,application/xhtml+xml,*/*;q=0.8", http.StatusFound, "/ui/"},
		{"browser head", "HEAD", "/", "text/html", http.StatusFound, "/ui/"},
		{"curl", "GET", "/", "*/*", http.StatusNotFound, ""},
		{"json client", "GET", "/", "application/json", http.StatusNotFound, ""},
		{"browser post", "POST", "/", "text/html", http.StatusNotFound, ""},
		{"browser elsewhere", "GET", "/nothing", "text/html", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			req.Header.Set("Accept", tt.accept)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || rec.Header().Get("Location") != tt.wantLocation {
				t.Errorf("%s %s = %d Location %q, want %d %q", tt.method, tt.path, rec.Code, rec.Header().Get("Location"), tt.wantStatus, tt.wantLocation)
			}
		})
	}
}
