package s3payloads

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"flowservice/pkg/awsretry"
	"flowservice/pkg/awstest"
)

// TestClient runs the payload store on Client against moto: what one
// function puts, another reads back, the SDK sees the same objects, a
// missing key is ErrNotFound, and DeletePrefix removes exactly
// its prefix.
func TestClient(t *testing.T) {
	ctx := context.Background()
	awsCfg := awstest.Start(t)
	bucket := strings.ToLower(awstest.UniqueName(t, "payloads"))
	sdk := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = true })
	if err := CreateBucket(ctx, sdk, bucket, 1); err != nil {
		t.Fatal(err)
	}
	var calls []string
	store := New(NewClient(awsCfg, func(svc, op string, _ any) { calls = append(calls, svc+":"+op) }), bucket)

	body := []byte(strings.Repeat("payload ", 1000))
	keys := []string{"runs/p1/run 1/trigger", "runs/p1/run+2/step=a&b", "runs/p2/run3/trigger"}
	for _, k := range keys {
		if err := store.Put(ctx, k, body); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
	}
	for _, k := range keys {
		got, err := store.Get(ctx, k)
		if err != nil || string(got) != string(body) {
			t.Fatalf("get %q: %d bytes, %v", k, len(got), err)
		}
	}
	// The SDK reads the same object under the same key.
	out, err := sdk.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(keys[1])})
	if err != nil {
		t.Fatalf("SDK get: %v", err)
	}
	out.Body.Close()
	if _, err := store.Get(ctx, "runs/p1/missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing key: %v, want ErrNotFound", err)
	}
	if err := store.DeletePrefix(ctx, "runs/p1/"); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		_, err := store.Get(ctx, k)
		if gone := errors.Is(err, ErrNotFound); gone != (i < 2) {
			t.Errorf("after DeletePrefix(runs/p1/): %q gone = %v (%v)", k, gone, err)
		}
	}
	if err := store.Delete(ctx, keys[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(ctx, keys[2]); !errors.Is(err, ErrNotFound) {
		t.Errorf("after Delete: %v", err)
	}
	for _, op := range []string{"PutObject", "GetObject", "ListObjectsV2", "DeleteObjects", "DeleteObject"} {
		if !slices.Contains(calls, "S3:"+op) {
			t.Errorf("observed calls %v lack S3:%s", calls, op)
		}
	}

	// A refused request is an error naming S3's code, not a silent success.
	bad := New(NewClient(awsCfg, nil), bucket+"-missing")
	if err := bad.Put(ctx, "k", body); err == nil || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Errorf("put to a missing bucket: %v", err)
	}
}

// TestClientURL: real AWS addresses the bucket by host, keys escaped.
func TestClientURL(t *testing.T) {
	c := NewClient(aws.Config{Region: "eu-west-1"}, nil)
	if got, want := c.url("b", "runs/a b/c+d", nil), "https://b.s3.eu-west-1.amazonaws.com/runs/a%20b/c%2Bd"; got != want {
		t.Errorf("url = %s, want %s", got, want)
	}
}

// TestClientRetries: S3's throttle (503 SlowDown) and server errors are
// tried again with the same body, as the SDK's client would; an access
// refusal is not.
func TestClientRetries(t *testing.T) {
	var calls atomic.Int32
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		switch n := calls.Add(1); {
		case strings.Contains(r.URL.Path, "denied"):
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`<Error><Code>AccessDenied</Code><Message>no</Message></Error>`))
		case n == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
		case n == 2:
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>`))
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(srv.Close)
	c := NewClient(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}, nil)
	c.retry = awsretry.Policy{Attempts: 4, Base: time.Millisecond, Max: time.Millisecond}
	store := New(c, "bucket")
	if err := store.Put(context.Background(), "runs/p/r/trigger", []byte("payload")); err != nil || calls.Load() != 3 {
		t.Fatalf("put = %v after %d calls, want success after 3", err, calls.Load())
	}
	if bodies[0] != "payload" || bodies[2] != "payload" {
		t.Errorf("bodies sent %q", bodies)
	}
	calls.Store(10)
	if err := store.Put(context.Background(), "denied/key", []byte("x")); err == nil || calls.Load() != 11 {
		t.Errorf("403: %v after %d calls, want an error after 1", err, calls.Load()-10)
	}
}
