package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestHangingTokenEndpoint: a token endpoint that never answers ends the
// exchange and the refresh with an error once the client's time for the
// whole call is up, although the library tries the endpoint twice; the
// callback then shows its error page (TokenTimeout) instead of hanging.
func TestHangingTokenEndpoint(t *testing.T) {
	done := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(done)
	c := New(http.DefaultTransport)
	c.timeout = 300 * time.Millisecond
	app := automation.OAuthApp{Name: "slow", ClientID: "id", TokenURL: srv.URL + "/token", AuthorizeURL: srv.URL + "/auth"}
	if _, err := c.Exchange(context.Background(), app, "secret", "https://flows.example/cb", "code", "verifier"); err == nil {
		t.Fatal("exchange with a hanging endpoint succeeded")
	}
	if _, err := c.Refresh(context.Background(), app, "secret", "refresh"); err == nil {
		t.Fatal("refresh with a hanging endpoint succeeded")
	}
	if n := calls.Load(); n < 2 {
		t.Errorf("the endpoint saw %d requests; want each call to have reached it", n)
	}
}
