package awsapp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/pkg/respbudget"
)

// ResponseBudget is the most bytes an HTTP function's answer may take as
// Lambda returns it: the proxy response as JSON, the body inside it as a
// string (escaped again). Lambda refuses answers over 6 MiB (6,291,556
// bytes, Function.ResponseSizeTooLarge) and ends the runtime: the client
// gets a 502 and the next request a cold start. The budget leaves room for
// the headers.
//
// The management API cuts its answers to it the way flowd cuts its own
// (pkg/respbudget, through httpapi.WithResponseBudget): only the measure
// differs, LambdaBudget's. docs/api.md "Large answers" describes it.
const ResponseBudget = respbudget.DefaultBytes

// LambdaBudget is the management API's budget on Lambda: bytes (normally
// ResponseBudget) of the answer as the proxy response carries it.
func LambdaBudget(bytes int) respbudget.Budget {
	return respbudget.Budget{Bytes: bytes, Size: proxySize}
}

// proxySize is the size of an answer with header h and body as the proxy
// adapter hands it to the runtime (httpadapter puts the headers in
// multiValueHeaders and a JSON body as a string).
func proxySize(h http.Header, body []byte) int {
	return responseSize(&events.APIGatewayProxyResponse{StatusCode: http.StatusOK, MultiValueHeaders: h, Body: string(body)})
}

// responseSize is the size of resp as the runtime returns it (the lambda
// package encodes it without HTML escaping: see the functions' main).
func responseSize(resp *events.APIGatewayProxyResponse) int {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		return 0
	}
	return buf.Len()
}

// tooLarge makes resp a 500 RESPONSE_TOO_LARGE envelope, which Lambda
// returns, instead of an answer Lambda would refuse: the last guard of
// every HTTP function (the management API cuts its answers before).
func tooLarge(resp *events.APIGatewayProxyResponse, size int) {
	requestID := http.Header(resp.MultiValueHeaders).Get("X-Request-Id")
	if requestID == "" {
		requestID = resp.Headers["X-Request-Id"]
	}
	resp.StatusCode, resp.IsBase64Encoded = http.StatusInternalServerError, false
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{"error": map[string]string{
		"code":      "RESPONSE_TOO_LARGE",
		"message":   "the answer is " + strconv.Itoa(size) + " bytes, over what Lambda can return",
		"requestId": requestID,
	}})
	resp.Body = buf.String()
	for _, k := range []string{"Content-Type", "Content-Encoding", "Content-Disposition"} {
		delete(resp.Headers, k)
		http.Header(resp.MultiValueHeaders).Del(k)
	}
	if resp.MultiValueHeaders == nil {
		resp.MultiValueHeaders = map[string][]string{}
	}
	http.Header(resp.MultiValueHeaders).Set("Content-Type", "application/json")
}
