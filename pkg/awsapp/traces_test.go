package awsapp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"flowservice/pkg/automation"
	"flowservice/pkg/emf"
	"flowservice/pkg/tracing"
)

// TestInvocationFlushesTraces: a span ended during an invocation is at the
// collector when the invocation returns (Lambda freezes the environment
// right after), and a collector that does not answer holds an invocation
// back no longer than TraceFlushTimeout or what is left of its time.
func TestInvocationFlushesTraces(t *testing.T) {
	var spans atomic.Int32
	var hanging atomic.Bool
	hang := make(chan struct{})
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hanging.Load() {
			<-hang
			return
		}
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans.Add(int32(len(ss.Spans)))
			}
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(col.Close)
	t.Cleanup(func() { close(hang) })
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	tr, err := tracing.FromEnv(context.Background(), "flowservice-runner", nil)
	if err != nil || tr == nil {
		t.Fatalf("FromEnv = %v, %v", tr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	var logs bytes.Buffer
	a := &App{Log: newLogger(Config{LogOutput: &logs}), metrics: emf.New(io.Discard, "prod"), tracer: tr}
	now := time.Now()
	h := a.SQS("runner", func(ctx context.Context, _ events.SQSEvent) (events.SQSEventResponse, error) {
		tr.RunEnded(ctx, automation.Run{ID: "run_1", Status: automation.RunSucceeded, Created: now, Finished: &now})
		return events.SQSEventResponse{}, nil
	})
	if _, err := h(context.Background(), events.SQSEvent{}); err != nil {
		t.Fatal(err)
	}
	if n := spans.Load(); n != 1 {
		t.Fatalf("the collector had %d spans when the invocation returned, want its 1", n)
	}

	// The collector stops answering: an invocation with 300 ms left
	// returns about 100 ms before its end, not after the exporter's own
	// timeout (10 s) and retries (a minute).
	hanging.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := h(ctx, events.SQSEvent{}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("an invocation waited %s for an unreachable collector", took)
	}
	if !strings.Contains(logs.String(), "traces not exported") {
		t.Errorf("no warning logged: %s", logs.String())
	}
}
