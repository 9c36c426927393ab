// Package lambdacode runs CODE steps on AWS: Runner sends each script to
// the code function (functions/code) with Lambda Invoke, and Handler is
// that function's side. Only the code function links the JavaScript
// engine; the runner and the workflow builder receiver reach it through
// Runner, a signed HTTPS call.
package lambdacode

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsretry"
	"flowservice/pkg/fairshare"
)

// MaxPayload is the largest request or answer of a synchronous Lambda
// invoke (6 MB); a step whose run data is larger fails with a clear error.
const MaxPayload = 6_000_000

// Runner is an automation.CodeRunner over the code function.
//
// It calls the Lambda Invoke API itself, signed with the SDK's SigV4
// signer, rather than through the SDK's Lambda client: that client
// registers the schemas of every Lambda operation when it is linked and
// made the runner and the workflow receiver 2.4 MB larger, for one call.
type Runner struct {
	cfg      aws.Config
	endpoint string
	function string
	signer   *v4.Signer
	client   aws.HTTPClient
	retry    awsretry.Policy
	shares   *fairshare.Slots // nil: no sharing (shares.go)
}

var _ automation.CodeRunner = (*Runner)(nil)

// New returns a Runner that invokes function (a function name) with the
// region, credentials, HTTP client and endpoint (AWS_ENDPOINT_URL) of cfg.
func New(cfg aws.Config, function string) *Runner {
	endpoint := "https://lambda." + cfg.Region + ".amazonaws.com"
	if strings.HasPrefix(cfg.Region, "cn-") {
		endpoint += ".cn"
	}
	if cfg.BaseEndpoint != nil && *cfg.BaseEndpoint != "" {
		endpoint = strings.TrimSuffix(*cfg.BaseEndpoint, "/")
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	return &Runner{cfg: cfg, endpoint: endpoint, function: function, signer: v4.NewSigner(), client: client, retry: awsretry.Default}
}

// WithRetry sets how r retries an Invoke that was throttled or met a
// server error (default awsretry.Default).
func (r *Runner) WithRetry(p awsretry.Policy) *Runner {
	r.retry = p
	return r
}

// RunCode invokes the code function with req and returns its answer. A
// failed invoke or a function error (the function crashed or timed out)
// is an error, worth a retry; the script's own failures are in the result.
func (r *Runner) RunCode(ctx context.Context, req automation.CodeRequest) (automation.CodeResult, error) {
	payload, err := json.Marshal(req)
	if err != nil {
		return automation.CodeResult{}, fmt.Errorf("lambdacode: encode request: %w", err)
	}
	if len(payload) > MaxPayload {
		return automation.CodeResult{Error: fmt.Sprintf(
			"the run's data for this step is %d bytes; CODE steps on AWS take at most %d", len(payload), MaxPayload)}, nil
	}
	done, err := r.share(ctx, req)
	if err != nil {
		return automation.CodeResult{}, err
	}
	body, fnErr, err := r.invoke(ctx, payload)
	done()
	if err != nil {
		return automation.CodeResult{}, fmt.Errorf("lambdacode: invoke %s: %w", r.function, err)
	}
	if fnErr != "" {
		var fe struct {
			ErrorMessage string `json:"errorMessage"`
		}
		_ = json.Unmarshal(body, &fe)
		return automation.CodeResult{}, fmt.Errorf("lambdacode: %s failed (%s): %s", r.function, fnErr, fe.ErrorMessage)
	}
	var res automation.CodeResult
	if err := json.Unmarshal(body, &res); err != nil {
		return automation.CodeResult{}, fmt.Errorf("lambdacode: decode the answer of %s: %w", r.function, err)
	}
	return res, nil
}

// invoke is a synchronous Invoke, tried again (awsretry) when Lambda
// throttled it (429 TooManyRequestsException: the code function at its
// reserved concurrency) or failed it (5xx), or the connection dropped: in
// those cases the script did not run to an answer. A function error is an
// answer, not retried here (the run's own retries decide).
func (r *Runner) invoke(ctx context.Context, payload []byte) (body []byte, fnErr string, err error) {
	err = awsretry.Do(ctx, r.retry, func() error {
		var e error
		body, fnErr, e = r.invokeOnce(ctx, payload)
		return e
	})
	return body, fnErr, err
}

// invokeOnce is one Invoke call: POST
// /2015-03-31/functions/{name}/invocations. It returns the answer and the
// X-Amz-Function-Error header.
func (r *Runner) invokeOnce(ctx context.Context, payload []byte) (body []byte, fnErr string, err error) {
	u := r.endpoint + "/2015-03-31/functions/" + url.PathEscape(r.function) + "/invocations"
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(payload))
	if err != nil {
		return nil, "", err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("X-Amz-Invocation-Type", "RequestResponse")
	creds, err := r.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("credentials: %w", err)
	}
	sum := sha256.Sum256(payload)
	if err := r.signer.SignHTTP(ctx, creds, hreq, hex.EncodeToString(sum[:]), "lambda", r.cfg.Region, time.Now()); err != nil {
		return nil, "", fmt.Errorf("sign: %w", err)
	}
	resp, err := r.client.Do(hreq)
	if err != nil {
		if awsretry.Transport(ctx, err) {
			return nil, "", &awsretry.Retryable{Err: err}
		}
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, MaxPayload+1))
	if err != nil {
		return nil, "", fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &e)
		errType, _, _ := strings.Cut(resp.Header.Get("X-Amzn-ErrorType"), ":")
		err := fmt.Errorf("status %d %s: %s", resp.StatusCode, errType, e.Message)
		if awsretry.Status(resp.StatusCode) || awsretry.Code(errType) {
			return nil, "", &awsretry.Retryable{Err: err}
		}
		return nil, "", err
	}
	return body, resp.Header.Get("X-Amz-Function-Error"), nil
}

// Handler is the code function: it runs each request in runner (the
// sandbox pool of that function's own binary), and answers a check request
// (CodeRequest.Check) with check's verdict, compiling without running.
func Handler(runner automation.CodeRunner, check func(code string) error) func(context.Context, automation.CodeRequest) (automation.CodeResult, error) {
	return func(ctx context.Context, req automation.CodeRequest) (automation.CodeResult, error) {
		if req.Code == "" {
			return automation.CodeResult{}, errors.New("lambdacode: the request has no code")
		}
		if req.Check {
			if err := check(req.Code); err != nil {
				return automation.CodeResult{Error: err.Error()}, nil
			}
			return automation.CodeResult{}, nil
		}
		return runner.RunCode(ctx, req)
	}
}

// MaxCheckTime bounds a save's syntax check through the code function.
const MaxCheckTime = 10 * time.Second

// CodeCheck compiles code in the code function through runner (a Runner):
// the syntax error, or nil. When the function cannot be reached the code is
// not refused (nil): the step would report the error when it runs, as it
// did before the check, and a save is not failed by another function.
func CodeCheck(runner automation.CodeRunner, code string) error {
	ctx, cancel := context.WithTimeout(context.Background(), MaxCheckTime)
	defer cancel()
	res, err := runner.RunCode(ctx, automation.CodeRequest{Code: code, Check: true})
	if err != nil || res.Error == "" {
		return nil
	}
	return errors.New(res.Error)
}
