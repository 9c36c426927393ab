package awsapp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"flowservice/pkg/awsenv"
	"flowservice/pkg/emf"
	"flowservice/pkg/httpapi"
	"flowservice/pkg/sqsqueue"
)

// ProxyHandler handles one API Gateway REST API (v1) proxy event; it is what
// the HTTP functions pass to lambda.Start.
type ProxyHandler func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)

// SQSHandler handles one batch of run queue messages; it is what the runner
// passes to lambda.Start.
type SQSHandler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// NewWebhookHandler builds the flow builder receiver function.
func NewWebhookHandler(ctx context.Context, awsCfg aws.Config, cfg Config) (ProxyHandler, error) {
	a, err := New(ctx, awsCfg, cfg, Parts{Name: "webhook function"})
	if err != nil {
		return nil, err
	}
	h := httpapi.NewWebhook(a.Svc, hookConfig(cfg, a))
	// Approval links and callback URLs are made on the engine URL, whose
	// API Gateway fronts this function (the api function cannot serve it:
	// it names the engine URL in its environment, and the API would name
	// the function back). They are not deliveries: no webhook metric.
	links := platformAllowlist(cfg.AllowedCIDRs, httpapi.NewLinks(a.Svc, a.Log))
	hooks := emf.Webhooks(a.metrics, "webhook", platformAllowlist(cfg.AllowedCIDRs, h))
	return a.Proxy("webhook", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/approvals/") || strings.HasPrefix(r.URL.Path, "/api/v1/callbacks/") {
			links.ServeHTTP(w, r)
			return
		}
		hooks.ServeHTTP(w, r)
	})), nil
}

// NewWorkflowHookHandler builds the workflow builder receiver function. It
// executes ON_COMPLETION runs inline, waiting at most cfg.SyncTimeout.
func NewWorkflowHookHandler(ctx context.Context, awsCfg aws.Config, cfg Config) (ProxyHandler, error) {
	a, err := New(ctx, awsCfg, cfg, Parts{Name: "workflowhook function"})
	if err != nil {
		return nil, err
	}
	h := httpapi.NewWorkflowHook(a.Svc, hookConfig(cfg, a))
	return a.Proxy("workflowhook", emf.Webhooks(a.metrics, "workflowhook", platformAllowlist(cfg.AllowedCIDRs, h))), nil
}

func hookConfig(cfg Config, a *App) httpapi.HookConfig {
	maxBody := cfg.MaxBody
	if maxBody <= 0 {
		maxBody = MaxProxyBody
	}
	return httpapi.HookConfig{
		MaxBody: maxBody, SyncTimeout: cfg.SyncTimeout, ClientIP: SourceIP, Log: a.Log,
	}
}

// SourceIP is the client address of a request that came through API
// Gateway: requestContext.identity.sourceIp, which the proxy adapter keeps
// in the request's context. API Gateway sets it from the connection, so,
// unlike X-Forwarded-For, a client cannot choose it.
func SourceIP(r *http.Request) (netip.Addr, bool) {
	rc, ok := core.GetAPIGatewayContextFromContext(r.Context())
	if !ok {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(rc.Identity.SourceIP)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// platformAllowlist refuses requests from outside the platform-wide ranges
// before the receiver sees them. The API Gateway resource policy does the
// same; checking here too keeps the rule where `sam local` and a policy
// lost to a template mistake would otherwise drop it.
func platformAllowlist(allowed []netip.Prefix, next http.Handler) http.Handler {
	if len(allowed) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, ok := SourceIP(r)
		if ok {
			for _, p := range allowed {
				if p.Contains(ip) {
					next.ServeHTTP(w, r)
					return
				}
			}
		}
		var requestID string
		if rc, ok := core.GetAPIGatewayContextFromContext(r.Context()); ok {
			requestID = rc.RequestID
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
			"code": "IP_NOT_ALLOWED", "message": "this webhook does not accept requests from your address", "requestId": requestID,
		}})
	})
}

// NewRunnerHandler builds the runner function: it executes each message of
// a batch and reports the ones that failed, so that only those come back.
func NewRunnerHandler(ctx context.Context, awsCfg aws.Config, cfg Config) (SQSHandler, error) {
	a, err := New(ctx, awsCfg, cfg, Parts{Name: "runner function"})
	if err != nil {
		return nil, err
	}
	sqsc := newSqsClient(sqs.NewFromConfig(ClientConfig(awsCfg, cfg)))
	runner := sqsqueue.Runner(a.Svc, sqsqueue.Backoff{Client: sqsc, QueueURL: cfg.QueueURL}, a.Log)
	return a.SQS("runner", a.WithAlerts(runner)), nil
}

// Build reads a function's configuration from the environment through
// getenv (main passes os.Getenv) and builds its handler with newHandler,
// once per cold start. It also sets the Go runtime's soft memory limit from
// the function's memory size (memoryLimit).
func Build[H any](getenv func(string) string, newHandler func(context.Context, aws.Config, Config) (H, error)) (H, error) {
	var zero H
	setMemoryLimit(getenv)
	cfg, err := ConfigFrom(getenv)
	if err != nil {
		return zero, err
	}
	awsCfg, err := awsenv.Config(getenv)
	if err != nil {
		return zero, fmt.Errorf("aws config: %w", err)
	}
	return newHandler(context.Background(), awsCfg, cfg)
}
