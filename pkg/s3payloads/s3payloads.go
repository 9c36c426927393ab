// Package s3payloads keeps the parts of run records too large for a
// DynamoDB item (webhook bodies up to awsapp.MaxProxyBody, 4,303,392
// bytes, on Lambda; large step outputs) as objects in an S3 bucket. pkg/dynamostore decides what goes
// here and keeps a reference in the run item; this package only stores
// bytes under keys. The Lambda functions reach the bucket through Client,
// a small signed-REST client that keeps the SDK's S3 client out of their
// binaries; tests and tools may pass the SDK's.
//
// Objects are removed two ways: with their runs when a flow is deleted or
// runs are purged (DeletePrefix, best effort), and by the bucket's lifecycle
// rule (CreateBucket, and the SAM template), which catches the objects of
// runs that DynamoDB's TTL expired, since TTL deletions call no code.
package s3payloads

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// ErrNotFound is returned by Get for a key that holds no object. It does not
// wrap automation.ErrNotFound: a run whose payload is missing is a broken
// record, not a missing run.
var ErrNotFound = errors.New("s3payloads: no such object")

// API is the part of the S3 client the Store uses. *s3.Client implements
// it; tests substitute a stub to inject failures.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, opts ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, opts ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

var _ API = (*s3.Client)(nil)

// Store keeps payloads in one bucket. It is safe for concurrent use.
type Store struct {
	s3     API
	bucket string
}

// New returns a Store on a bucket, which must exist (CreateBucket, or the
// template). Against a local endpoint the client needs path-style
// addressing (s3.Options.UsePathStyle).
func New(client API, bucket string) *Store {
	return &Store{s3: client, bucket: bucket}
}

// Put stores data under key, replacing any object there.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	_, err := s.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String("application/octet-stream"),
	})
	if err != nil {
		return fmt.Errorf("s3payloads: put %s: %w", key, err)
	}
	return nil
}

// Get returns the object under key, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	} else if err != nil {
		return nil, fmt.Errorf("s3payloads: get %s: %w", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("s3payloads: read %s: %w", key, err)
	}
	return b, nil
}

// Delete removes the object under key; a missing object is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if _, err := s.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key}); err != nil {
		return fmt.Errorf("s3payloads: delete %s: %w", key, err)
	}
	return nil
}

// DeletePrefix removes every object whose key starts with prefix, a
// thousand per request (DeleteObjects' maximum).
func (s *Store) DeletePrefix(ctx context.Context, prefix string) error {
	if prefix == "" {
		return errors.New("s3payloads: delete prefix: refusing to empty the whole bucket")
	}
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix}
	for {
		out, err := s.s3.ListObjectsV2(ctx, in)
		if err != nil {
			return fmt.Errorf("s3payloads: list %s: %w", prefix, err)
		}
		if len(out.Contents) > 0 {
			ids := make([]types.ObjectIdentifier, len(out.Contents))
			for i, o := range out.Contents {
				ids[i] = types.ObjectIdentifier{Key: o.Key}
			}
			res, err := s.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{
				Bucket: &s.bucket, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
			})
			if err != nil {
				return fmt.Errorf("s3payloads: delete %s: %w", prefix, err)
			}
			if len(res.Errors) > 0 {
				e := res.Errors[0]
				return fmt.Errorf("s3payloads: delete %s: %d objects failed, first %s: %s",
					prefix, len(res.Errors), aws.ToString(e.Key), aws.ToString(e.Message))
			}
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

// BucketAPI is the part of the S3 client CreateBucket uses.
type BucketAPI interface {
	CreateBucket(ctx context.Context, in *s3.CreateBucketInput, opts ...func(*s3.Options)) (*s3.CreateBucketOutput, error)
	PutBucketLifecycleConfiguration(ctx context.Context, in *s3.PutBucketLifecycleConfigurationInput, opts ...func(*s3.Options)) (*s3.PutBucketLifecycleConfigurationOutput, error)
}

var _ BucketAPI = (*s3.Client)(nil)

// LifecycleRuleID names the rule CreateBucket puts on the bucket.
const LifecycleRuleID = "expire-run-payloads"

// CreateBucket creates the bucket if it does not exist (in us-east-1, the
// region that takes no location constraint; elsewhere give the template the
// job) and sets its lifecycle rule: objects expire expireDays days after
// they were written. Choose at least the run retention in days plus one, so
// a payload never goes before its run; the rule then also removes the
// payloads of runs that DynamoDB's TTL expired. It is what tests and the
// local FLOWD_BACKEND=aws mode use; the SAM template declares the same.
func CreateBucket(ctx context.Context, client BucketAPI, bucket string, expireDays int32) error {
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("s3payloads: create bucket %s: %w", bucket, err)
	}
	_, err = client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
		Bucket: &bucket,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{
			ID:         aws.String(LifecycleRuleID),
			Status:     types.ExpirationStatusEnabled,
			Filter:     &types.LifecycleRuleFilter{Prefix: aws.String("")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(expireDays)},
		}}},
	})
	if err != nil {
		return fmt.Errorf("s3payloads: set lifecycle of %s: %w", bucket, err)
	}
	return nil
}
