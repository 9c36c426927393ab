package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"time"
)

var lambdas = []string{"api", "webhook", "workflowhook", "runner"}

// benchLambdas builds each function's bootstrap as the Makefile does for
// Lambda (linux/arm64) for its size, and once more for this machine to
// time a cold start: from the process start to its first poll of a
// loopback Runtime API.
func benchLambdas(ctx context.Context, c config, r *report) error {
	dir, err := os.MkdirTemp("", "flowbench-lambda")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	flags := []string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w"}
	var rows [][]string
	for _, name := range lambdas {
		arm := filepath.Join(dir, name+"-arm64")
		b := exec.CommandContext(ctx, "go", append(flags, "-o", arm, "./functions/"+name)...)
		b.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
		if out, err := b.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s for arm64: %v\n%s", name, err, out)
		}
		st, err := os.Stat(arm)
		if err != nil {
			return err
		}
		native := filepath.Join(dir, name)
		b = exec.CommandContext(ctx, "go", append(flags, "-o", native, "./functions/"+name)...)
		b.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := b.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", name, err, out)
		}
		var starts latencies
		for range 7 {
			d, err := firstPoll(ctx, native)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			starts = append(starts, d)
		}
		sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
		log.Printf("flowbench: %s bootstrap %s, first poll %v", name, mb(st.Size()), starts.pct(50))
		r.target("(h) "+name+" bootstrap size", "< 15 MB", mb(st.Size()), st.Size() < 15e6)
		r.target("(h) "+name+" start → first poll", "< 20 ms", ms(starts.pct(50)), starts.pct(50) < 20*time.Millisecond)
		rows = append(rows, []string{name, "**" + mb(st.Size()) + "**", "**" + ms(starts.pct(50)) + "**", ms(starts[len(starts)-1])})
	}
	r.section("(h) Lambda bootstraps")
	r.para("Size: built as for Lambda (`GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags \"-s -w\"`). "+
		"Start: the same build for this machine (%s/%s; an arm64 binary does not run here), started 7 times against a Runtime API "+
		"on loopback, from the process start to its first GET …/invocation/next (its init: configuration, AWS SDK clients, "+
		"the cursor key read from a fake Secrets Manager on loopback, handler).", runtime.GOOS, runtime.GOARCH)
	r.code("go run ./cmd/flowbench -only lambda")
	r.table([]string{"function", "bootstrap size", "start → first poll, median", "slowest of 7"}, rows)
	return nil
}

// firstPoll starts a bootstrap and times it to its first Runtime API poll.
func firstPoll(ctx context.Context, bin string) (time.Duration, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	polled := make(chan time.Time, 1)
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/2018-06-01/runtime/invocation/next" {
			select {
			case polled <- time.Now():
			default:
			}
			<-release
		}
		http.Error(w, "stopping", http.StatusInternalServerError)
	})}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	defer close(release)
	// AWS is a fake on loopback that answers what a cold start asks for
	// (the cursor key from Secrets Manager) and refuses anything else, so
	// nothing leaves the machine.
	fake, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	fakeSrv := &http.Server{Handler: http.HandlerFunc(fakeAWS)}
	go func() { _ = fakeSrv.Serve(fake) }()
	defer fakeSrv.Close()
	dead := fake.Addr().String()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"AWS_LAMBDA_RUNTIME_API=" + l.Addr().String(),
		"AWS_LAMBDA_FUNCTION_NAME=flowbench", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing",
		"AWS_ENDPOINT_URL=http://" + dead, "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"STAGE=bench", "LOG_LEVEL=warn",
		"TABLE_PROJECTS=p", "TABLE_KEYS=k", "TABLE_FLOWS=f", "TABLE_ROUTES=r", "TABLE_CONNECTIONS=c", "TABLE_RUNS=u", "TABLE_SAMPLES=s", "TABLE_AUDIT=a",
		"QUEUE_URL=http://" + dead + "/queue/runs", "PAYLOAD_BUCKET=b", "SECRET_PREFIX=flow/bench/",
		"CURSOR_KEY_SECRET_ARN=arn:aws:secretsmanager:us-east-1:123456789012:secret:cursor",
		"QUEUE_ARN=arn:aws:sqs:us-east-1:123456789012:runs", "SCHEDULE_GROUP=g", "SCHEDULER_ROLE_ARN=arn:aws:iam::123456789012:role/s",
		"ENGINE_URL=https://engine.example", "WORKFLOW_URL=https://workflow.example",
		"RUN_TIMEOUT=300s", "MAX_BODY_BYTES=4303392", "ALLOWED_CIDRS=0.0.0.0/0,::/0",
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()
	select {
	case at := <-polled:
		return at.Sub(start), nil
	case err := <-exited:
		exited <- err
		return 0, fmt.Errorf("exited before polling: %v: %s", err, stderr.String())
	case <-time.After(20 * time.Second):
		return 0, fmt.Errorf("no poll within 20 s: %s", stderr.String())
	}
}

// fakeAWS answers Secrets Manager's GetSecretValue with a fixed 64-character
// key, and every other call with an error.
func fakeAWS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"UnknownOperationException","message":"flowbench fake"}`))
		return
	}
	_, _ = w.Write([]byte(`{"ARN":"arn:aws:secretsmanager:us-east-1:123456789012:secret:cursor","Name":"cursor",` +
		`"SecretString":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","VersionId":"v1","VersionStages":["AWSCURRENT"]}`))
}
