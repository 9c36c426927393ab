package awsretry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

var fast = Policy{Attempts: 3, Base: time.Millisecond, Max: time.Millisecond}

// Do stops at success, at an error that is not Retryable, at the policy's
// attempts and when the context ends, and returns the cause unwrapped.
func TestDo(t *testing.T) {
	cause := errors.New("503 SlowDown")
	for _, c := range []struct {
		name      string
		fail      int // attempts that fail
		retryable bool
		ctx       func() context.Context
		wantCalls int
		wantErr   bool
	}{
		{"success after two", 2, true, context.Background, 3, false},
		{"spent", 5, true, context.Background, 3, true},
		{"not retryable", 5, false, context.Background, 1, true},
		{"context ended", 5, true, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, 1, true},
	} {
		calls := 0
		err := Do(c.ctx(), fast, func() error {
			calls++
			if calls <= c.fail {
				if c.retryable {
					return &Retryable{Err: cause}
				}
				return cause
			}
			return nil
		})
		if calls != c.wantCalls || (err != nil) != c.wantErr {
			t.Errorf("%s: %d calls, err %v; want %d calls, error %v", c.name, calls, err, c.wantCalls, c.wantErr)
		}
		var r *Retryable
		if errors.As(err, &r) {
			t.Errorf("%s: the error is still wrapped as Retryable", c.name)
		}
	}
	if !Status(http.StatusServiceUnavailable) || !Status(429) || Status(403) || Status(404) {
		t.Error("Status: 503 and 429 retry, 403 and 404 do not")
	}
	if !Code("SlowDown") || !Code("TooManyRequestsException") || Code("AccessDenied") {
		t.Error("Code: SlowDown and TooManyRequestsException retry, AccessDenied does not")
	}
}
