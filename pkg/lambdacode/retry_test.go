package lambdacode_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsretry"
	"flowservice/pkg/lambdacode"
)

var fastRetry = awsretry.Policy{Attempts: 3, Base: time.Millisecond, Max: time.Millisecond}

// TestInvokeRetriesThrottles: an Invoke throttled at the code function's
// reserved concurrency (429 TooManyRequestsException) or failed by Lambda
// (503) is sent again, the same payload, until it is answered; a refusal
// (403) is not; attempts stop at the policy's count.
func TestInvokeRetriesThrottles(t *testing.T) {
	var calls atomic.Int32
	var payloads []string
	cfg := fakeLambda(t, func(w http.ResponseWriter, _ string, payload []byte) {
		payloads = append(payloads, string(payload))
		switch calls.Add(1) {
		case 1:
			w.Header().Set("X-Amzn-ErrorType", "TooManyRequestsException:")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"message": "Rate Exceeded."}`))
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"message": "Service Unavailable"}`))
		default:
			w.Write([]byte(`{"output": 2, "logs": []}`))
		}
	})
	res, err := lambdacode.New(cfg, "code").WithRetry(fastRetry).RunCode(context.Background(), automation.CodeRequest{Code: "return 2"})
	if err != nil || string(res.Output) != "2" || calls.Load() != 3 {
		t.Fatalf("RunCode = %s, %v after %d calls; want 2 after 3", res.Output, err, calls.Load())
	}
	if payloads[0] != payloads[2] {
		t.Errorf("the retry sent another payload")
	}

	var refused atomic.Int32
	cfg = fakeLambda(t, func(w http.ResponseWriter, _ string, _ []byte) {
		refused.Add(1)
		w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"message": "not authorized"}`))
	})
	if _, err := lambdacode.New(cfg, "code").WithRetry(fastRetry).RunCode(context.Background(), automation.CodeRequest{Code: "return 1"}); err == nil || refused.Load() != 1 {
		t.Errorf("403: err %v after %d calls, want an error after 1", err, refused.Load())
	}

	var throttled atomic.Int32
	cfg = fakeLambda(t, func(w http.ResponseWriter, _ string, _ []byte) {
		throttled.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"message": "Rate Exceeded."}`))
	})
	_, err = lambdacode.New(cfg, "code").WithRetry(fastRetry).RunCode(context.Background(), automation.CodeRequest{Code: "return 1"})
	if err == nil || !strings.Contains(err.Error(), "429") || throttled.Load() != 3 {
		t.Errorf("always throttled: err %v after %d calls, want the 429 after 3", err, throttled.Load())
	}
}
