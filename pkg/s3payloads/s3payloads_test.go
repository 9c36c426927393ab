package s3payloads_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"flowservice/pkg/awstest"
	"flowservice/pkg/s3payloads"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

func newStore(t *testing.T) (*s3payloads.Store, *s3.Client, string) {
	t.Helper()
	client := s3.NewFromConfig(awstest.Start(t), func(o *s3.Options) { o.UsePathStyle = true })
	bucket := awstest.UniqueName(t, "payloads")
	if err := s3payloads.CreateBucket(t.Context(), client, bucket, 31); err != nil {
		t.Fatal(err)
	}
	return s3payloads.New(client, bucket), client, bucket
}

func TestPutGetDelete(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := t.Context()
	big := bytes.Repeat([]byte("0123456789abcdef"), 2<<20/16) // 2 MiB
	if err := s.Put(ctx, "runs/run_1/trigger", big); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "runs/run_1/trigger")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Get = %d bytes, %v; want the %d put", len(got), err, len(big))
	}
	if err := s.Put(ctx, "runs/run_1/empty", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "runs/run_1/empty"); err != nil || len(got) != 0 {
		t.Fatalf("Get empty = %q, %v", got, err)
	}
	if err := s.Delete(ctx, "runs/run_1/trigger"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "runs/run_1/trigger"); !errors.Is(err, s3payloads.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "runs/run_1/trigger"); err != nil {
		t.Fatalf("deleting a missing object: %v", err)
	}
}

func TestDeletePrefix(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := t.Context()
	for i := range 3 {
		for _, run := range []string{"run_a", "run_ab"} {
			if err := s.Put(ctx, fmt.Sprintf("runs/%s/o%d", run, i), []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.DeletePrefix(ctx, "runs/run_a/"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Get(ctx, fmt.Sprintf("runs/run_a/o%d", i)); !errors.Is(err, s3payloads.ErrNotFound) {
			t.Errorf("run_a object %d: %v, want deleted", i, err)
		}
		if _, err := s.Get(ctx, fmt.Sprintf("runs/run_ab/o%d", i)); err != nil {
			t.Errorf("run_ab object %d: %v, want kept (another run's prefix)", i, err)
		}
	}
	if err := s.DeletePrefix(ctx, ""); err == nil {
		t.Error("DeletePrefix(\"\") emptied the bucket")
	}
}

// TestCreateBucket checks the lifecycle rule is in place and that creating
// an existing bucket again is not an error.
func TestCreateBucket(t *testing.T) {
	_, client, bucket := newStore(t)
	if err := s3payloads.CreateBucket(t.Context(), client, bucket, 40); err != nil {
		t.Fatalf("second CreateBucket: %v", err)
	}
	out, err := client.GetBucketLifecycleConfiguration(t.Context(), &s3.GetBucketLifecycleConfigurationInput{Bucket: &bucket})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Rules) != 1 || aws.ToString(out.Rules[0].ID) != s3payloads.LifecycleRuleID ||
		out.Rules[0].Expiration == nil || aws.ToInt32(out.Rules[0].Expiration.Days) != 40 {
		t.Fatalf("lifecycle rules = %+v, want one expiring after 40 days", out.Rules)
	}
}
