// Package awsretry retries the AWS calls the functions make without the
// SDK's clients (pkg/lambdacode's Invoke, pkg/awsapp's S3 REST client),
// which therefore lack the SDK's standard retryer: throttles and server
// errors (429, 500, 502, 503 SlowDown, 504, a dropped connection) are
// tried again after an exponential backoff with full jitter, as the SDK's
// standard mode does.
package awsretry

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"
)

// Policy is how many times and how long to wait.
type Policy struct {
	Attempts int           // in all, the first included
	Base     time.Duration // the first backoff's ceiling; doubled each time
	Max      time.Duration // the ceiling of any backoff
}

// Default makes 3 attempts, as the SDK's standard mode, with backoffs of
// up to 100 ms then 200 ms (at most 2 s): short, since these calls are
// made inside a request (API Gateway's 29 s) or a step.
var Default = Policy{Attempts: 3, Base: 100 * time.Millisecond, Max: 2 * time.Second}

// Retryable marks an error worth another attempt.
type Retryable struct{ Err error }

func (r *Retryable) Error() string { return r.Err.Error() }
func (r *Retryable) Unwrap() error { return r.Err }

// Do calls call until it succeeds, returns an error that is not
// Retryable, the attempts are spent or ctx ends; it returns the last
// error, unwrapped from Retryable.
func Do(ctx context.Context, p Policy, call func() error) error {
	var err error
	for attempt := 0; ; attempt++ {
		err = call()
		var r *Retryable
		if err == nil || !errors.As(err, &r) {
			return err
		}
		if attempt+1 >= p.Attempts {
			return r.Err
		}
		// An ended context stops here, not in the select below: a select
		// with a ready timer as well picks either at random.
		if ctx.Err() != nil {
			return r.Err
		}
		ceiling := min(p.Base<<attempt, p.Max)
		wait := time.Duration(rand.Int64N(int64(ceiling) + 1))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return r.Err
		case <-t.C:
		}
	}
}

// Status tells whether an HTTP status from an AWS service is worth
// another attempt: throttling (429, and 503 which S3 sends as SlowDown)
// and server errors.
func Status(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// Code tells whether an AWS error code is a throttle or transient error
// sent with another status (S3's RequestTimeout is a 400).
func Code(code string) bool {
	switch code {
	case "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "Throttling", "ThrottlingException",
		"TooManyRequestsException", "RequestLimitExceeded", "EC2ThrottledException", "ServiceException":
		return true
	}
	return false
}

// Transport tells whether err from an HTTP client is a failure to get an
// answer (a reset or refused connection) rather than the caller's context
// ending.
func Transport(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil
}
