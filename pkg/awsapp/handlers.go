package awsapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"flowservice/pkg/automation"
	"flowservice/pkg/httpapi"
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
	return a.Proxy("webhook", webhookMetrics(a.metrics, "webhook", platformAllowlist(cfg.AllowedCIDRs, h))), nil
}

// NewWorkflowHookHandler builds the workflow builder receiver function. It
// executes ON_COMPLETION runs inline, waiting at most cfg.SyncTimeout.
func NewWorkflowHookHandler(ctx context.Context, awsCfg aws.Config, cfg Config) (ProxyHandler, error) {
	a, err := New(ctx, awsCfg, cfg, Parts{Name: "workflowhook function"})
	if err != nil {
		return nil, err
	}
	h := httpapi.NewWorkflowHook(a.Svc, hookConfig(cfg, a))
	return a.Proxy("workflowhook", webhookMetrics(a.metrics, "workflowhook", platformAllowlist(cfg.AllowedCIDRs, h))), nil
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

// messageHandler is the part of the Service the runner uses.
type messageHandler interface {
	HandleMessage(ctx context.Context, body []byte) error
}

// NewRunnerHandler builds the runner function: it executes each message of
// a batch and reports the ones that failed, so that only those come back.
func NewRunnerHandler(ctx context.Context, awsCfg aws.Config, cfg Config) (SQSHandler, error) {
	a, err := New(ctx, awsCfg, cfg, Parts{Name: "runner function"})
	if err != nil {
		return nil, err
	}
	sqsc := newSqsClient(sqs.NewFromConfig(ClientConfig(awsCfg, cfg)))
	runner := Runner(a.Svc, Backoff{Client: sqsc, QueueURL: cfg.QueueURL}, a.Log)
	return a.SQS("runner", a.WithAlerts(runner)), nil
}

// Visibility is the SQS calls a runner backs off with: it changes a
// message's visibility, or sends a fresh copy of it.
type Visibility interface {
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Backoff returns a message to its queue until a given time: the run's
// own next attempt (automation.RetryLater), exponential over its attempts,
// instead of the queue's flat visibility timeout. A zero Backoff (no
// Client) leaves the visibility timeout as it is.
//
// Every receive counts toward the queue's maxReceiveCount, a bounce too,
// although a bounce (the run held by a live attempt, or its next attempt
// not due: automation.IsRunClaimed) attempts nothing. So a message bounced
// at or past RequeueAt receives is not bounced but sent again, a fresh
// copy with a receive count of zero, and the old one acknowledged: only
// receives that attempt or fail (a failed attempt, which the run's own
// RUN_ATTEMPTS bounds; a store error; a crash or a timeout) add up to the
// dead-letter queue.
type Backoff struct {
	Client   Visibility
	QueueURL string
	// RequeueAt is the receive count from which a bounce sends a fresh
	// copy: 0 is DefaultRequeueAt.
	RequeueAt int
}

// DefaultRequeueAt is half of the run queue's maxReceiveCount (10,
// template.yaml): a bounce changes visibility (up to 12 h at once) for a
// message's first four receives and sends a fresh copy from the fifth, and
// the other half is room for receives that fail outright.
const DefaultRequeueAt = 5

// maxVisibility is SQS's longest visibility timeout (12 hours).
const maxVisibility = 12 * time.Hour

// maxDelay is SQS's longest message delay (15 minutes): a copy due later
// arrives early, finds its run not due, and is bounced by visibility.
const maxDelay = 15 * time.Minute

// delay makes message m visible again at the given time. It reports whether
// m was requeued instead (a copy sent): m is then to be acknowledged.
// Only a bounce (bounce set: the run held by a live attempt, or not due
// yet) is requeued; a failed attempt or a store error keeps its receive count.
func (b Backoff) delay(ctx context.Context, m events.SQSMessage, at time.Time, bounce bool) (requeued bool, err error) {
	if b.Client == nil || m.ReceiptHandle == "" {
		return false, nil
	}
	if bounce && b.requeues(m) {
		err := b.requeue(ctx, m, at)
		if err == nil {
			return true, nil
		}
		// Not sent: bounce as usual, and the message comes back.
		err = fmt.Errorf("requeue: %w", err)
		if verr := b.visibility(ctx, m, at); verr != nil {
			return false, errors.Join(err, verr)
		}
		return false, err
	}
	return false, b.visibility(ctx, m, at)
}

// requeues says whether a bounce of m sends a fresh copy.
func (b Backoff) requeues(m events.SQSMessage) bool {
	at := b.RequeueAt
	if at <= 0 {
		at = DefaultRequeueAt
	}
	n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
	return err == nil && n >= at
}

func (b Backoff) visibility(ctx context.Context, m events.SQSMessage, at time.Time) error {
	d := min(max(time.Until(at), 0), maxVisibility)
	_, err := b.Client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: &b.QueueURL, ReceiptHandle: &m.ReceiptHandle, VisibilityTimeout: int32(d.Round(time.Second) / time.Second),
	})
	return err
}

// requeue sends a copy of m (body and message attributes), due at at or
// within SQS's longest delay. A copy sent while m also comes back (the
// acknowledgement lost) is harmless: the run's claim is conditional, so
// one message executes the attempt and the other bounces or finds the run
// finished.
func (b Backoff) requeue(ctx context.Context, m events.SQSMessage, at time.Time) error {
	d := min(max(time.Until(at), 0), maxDelay)
	in := &sqs.SendMessageInput{
		QueueUrl: &b.QueueURL, MessageBody: &m.Body, DelaySeconds: int32((d + time.Second - 1) / time.Second),
		MessageGroupId: messageGroup(m), // the fair queue's tenant: sqsqueue/fair.go
	}
	if len(m.MessageAttributes) > 0 {
		in.MessageAttributes = make(map[string]sqstypes.MessageAttributeValue, len(m.MessageAttributes))
		for k, a := range m.MessageAttributes {
			dt := a.DataType
			in.MessageAttributes[k] = sqstypes.MessageAttributeValue{
				DataType: &dt, StringValue: a.StringValue, BinaryValue: a.BinaryValue,
				StringListValues: a.StringListValues, BinaryListValues: a.BinaryListValues,
			}
		}
	}
	_, err := b.Client.SendMessage(ctx, in)
	return err
}

// Runner handles a batch of run messages on svc, as the runner function
// and flowd's aws backend (pkg/awsdev) do. Records run concurrently: a batch
// of ten attempts must fit in the function's timeout, which is sized for one.
// A message whose run is to be tried later (automation.RetryLater) comes
// back when the run says, through b (a fresh copy once its receive count
// nears the DLQ's, Backoff.RequeueAt); a run held by another live attempt
// is the expected hand-over and is not logged as an error.
func Runner(svc messageHandler, b Backoff, log *slog.Logger) SQSHandler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		failed := make([]bool, len(ev.Records))
		var wg sync.WaitGroup
		for i, m := range ev.Records {
			wg.Go(func() {
				err := svc.HandleMessage(ctx, []byte(m.Body))
				if err == nil {
					return
				}
				failed[i] = true
				var later *automation.RetryLater
				if !errors.As(err, &later) {
					log.ErrorContext(ctx, "run message failed", "messageId", m.MessageId,
						"receiveCount", m.Attributes["ApproximateReceiveCount"], "err", err)
					return
				}
				if automation.IsRunClaimed(err) {
					log.InfoContext(ctx, "run held by a live attempt; message back at its lease end", "messageId", m.MessageId)
				} else {
					log.WarnContext(ctx, "run attempt failed; retried later", "messageId", m.MessageId,
						"at", later.At, "err", err)
				}
				requeued, err := b.delay(ctx, m, later.At, automation.IsRunClaimed(err))
				if err != nil {
					log.WarnContext(ctx, "back off run message", "messageId", m.MessageId, "err", err)
				}
				if requeued {
					// The copy is on the queue: this one is done with.
					failed[i] = false
					log.InfoContext(ctx, "run message sent again to reset its receive count", "messageId", m.MessageId,
						"receiveCount", m.Attributes["ApproximateReceiveCount"], "at", later.At)
				}
			})
		}
		wg.Wait()
		resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		for i, f := range failed {
			if f {
				resp.BatchItemFailures = append(resp.BatchItemFailures,
					events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
			}
		}
		// Never an error: that would return the whole batch, finished runs
		// included.
		return resp, nil
	}
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
	awsCfg, err := AWSConfig(getenv)
	if err != nil {
		return zero, fmt.Errorf("aws config: %w", err)
	}
	return newHandler(context.Background(), awsCfg, cfg)
}
