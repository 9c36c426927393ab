package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// TestBodyBudget: large bodies share the budget, one past it is refused
// as unavailable (503 BODY_BUDGET) once the wait is over; small bodies
// have their own share and are never held up by large ones; a body over
// the limit takes nothing (it is refused unread); room comes back on
// release.
func TestBodyBudget(t *testing.T) {
	const maxBody = 10 << 20
	b := NewBodyBudget(12<<20, maxBody)
	req := func(n int64) *http.Request {
		r := httptest.NewRequest("POST", "/", strings.NewReader(""))
		r.ContentLength = n
		return r
	}
	ctx := context.Background()
	first, err := b.reserve(ctx, req(8<<20), maxBody)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.reserve(ctx, req(8<<20), maxBody)
	var e *automation.Error
	if !errors.As(err, &e) || !errors.Is(err, automation.ErrUnavailable) || e.Code != "BODY_BUDGET" {
		t.Fatalf("second large body = %v; want BODY_BUDGET unavailable", err)
	}
	for range 100 {
		release, err := b.reserve(ctx, req(16<<10), maxBody)
		if err != nil {
			t.Fatalf("small body behind a large one: %v", err)
		}
		defer release()
	}
	if release, err := b.reserve(ctx, req(maxBody+1), maxBody); err != nil {
		t.Fatalf("a body over the limit: %v; want no reservation (413 unread)", err)
	} else {
		release()
	}
	chunked := httptest.NewRequest("POST", "/", strings.NewReader("x"))
	chunked.ContentLength = -1
	if _, err := b.reserve(ctx, chunked, maxBody); err == nil {
		t.Fatal("a chunked body took the limit's room beside a large one")
	}
	first()
	if release, err := b.reserve(ctx, req(8<<20), maxBody); err != nil {
		t.Fatalf("after the release: %v", err)
	} else {
		release()
	}
}
