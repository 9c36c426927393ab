package s3payloads

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"flowservice/pkg/awsretry"
)

// Client is the payload bucket's client on Lambda: the five object calls
// Store makes (API), as signed REST requests. It stands in for the SDK's
// S3 client for the size of the bootstraps: s3.New stores the client in an
// interface (its S3 Express credential provider), and in a binary that also
// calls methods by reflection (the expression engine) the linker then keeps
// all of S3's operations, about 3 MB of every function. It speaks the same
// types as the SDK, so Store cannot tell the difference.
type Client struct {
	http   aws.HTTPClient
	creds  aws.CredentialsProvider
	signer *v4.Signer
	region string
	// base is an explicit endpoint (a local emulator), addressed by path;
	// empty means the bucket's virtual-hosted AWS endpoint.
	base string
	// observe, if set, is told of each call (awsapp.Config.Observe).
	observe func(service, operation string, input any)
	now     func() time.Time
	// retry is how throttles (503 SlowDown) and server errors are tried
	// again, as the SDK's client would.
	retry awsretry.Policy
}

var _ API = (*Client)(nil)

// NewClient returns a Client with awsCfg's region, credentials, HTTP client
// and endpoint (BaseEndpoint, addressed by path: a local emulator). observe,
// if not nil, is told of each call before it is sent.
func NewClient(awsCfg aws.Config, observe func(service, operation string, input any)) *Client {
	c := &Client{
		http: awsCfg.HTTPClient, creds: awsCfg.Credentials, region: awsCfg.Region, observe: observe, now: time.Now,
		retry: awsretry.Default,
		// S3 signs the path as sent, without escaping it again.
		signer: v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }),
	}
	if c.http == nil {
		c.http = http.DefaultClient
	}
	if awsCfg.BaseEndpoint != nil {
		c.base = strings.TrimSuffix(*awsCfg.BaseEndpoint, "/")
	}
	return c
}

// url is the address of key (or of the bucket when key is empty).
func (c *Client) url(bucket, key string, query url.Values) string {
	escaped := escapeKey(key)
	var u string
	if c.base != "" {
		u = c.base + "/" + bucket + "/" + escaped
	} else {
		suffix := "amazonaws.com"
		if strings.HasPrefix(c.region, "cn-") {
			suffix = "amazonaws.com.cn"
		}
		u = "https://" + bucket + ".s3." + c.region + "." + suffix + "/" + escaped
	}
	if len(query) > 0 {
		u += "?" + strings.ReplaceAll(query.Encode(), "+", "%20")
	}
	return u
}

// escapeKey escapes an object key for a URL path, keeping its slashes.
func escapeKey(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		// "+" too: S3 has read it as a space in paths.
		parts[i] = strings.ReplaceAll(url.PathEscape(p), "+", "%2B")
	}
	return strings.Join(parts, "/")
}

// do sends a request (doOnce), again after a backoff while S3 answers a
// throttle or server error or the connection drops.
func (c *Client) do(ctx context.Context, op string, input any, method, u string, body []byte, header http.Header) (*http.Response, error) {
	if c.observe != nil {
		c.observe("S3", op, input)
	}
	var resp *http.Response
	err := awsretry.Do(ctx, c.retry, func() error {
		var e error
		resp, e = c.doOnce(ctx, op, method, u, body, header)
		return e
	})
	return resp, err
}

// doOnce signs and sends one request and returns the response of a 2xx
// status; any other status becomes the error S3 described.
func (c *Client) doOnce(ctx context.Context, op string, method, u string, body []byte, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("s3 %s: %w", op, err)
	}
	req.ContentLength = int64(len(body))
	if body == nil {
		req.Body = http.NoBody
	}
	for k, v := range header {
		req.Header[k] = v
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("s3 %s: credentials: %w", op, err)
	}
	if err := c.signer.SignHTTP(ctx, creds, req, hash, "s3", c.region, c.now()); err != nil {
		return nil, fmt.Errorf("s3 %s: sign: %w", op, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if awsretry.Transport(ctx, err) {
			return nil, &awsretry.Retryable{Err: fmt.Errorf("s3 %s: %w", op, err)}
		}
		return nil, fmt.Errorf("s3 %s: %w", op, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var e struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = xml.Unmarshal(raw, &e)
	if e.Code == "NoSuchKey" || (e.Code == "" && resp.StatusCode == http.StatusNotFound && method == http.MethodGet) {
		return nil, &types.NoSuchKey{Message: aws.String(e.Message)}
	}
	if e.Code == "" {
		e.Code = http.StatusText(resp.StatusCode)
	}
	err = fmt.Errorf("s3 %s: status %d: %w", op, resp.StatusCode, &smithy.GenericAPIError{Code: e.Code, Message: e.Message})
	if awsretry.Status(resp.StatusCode) || awsretry.Code(e.Code) {
		return nil, &awsretry.Retryable{Err: err}
	}
	return nil, err
}

func (c *Client) PutObject(ctx context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	var body []byte
	if in.Body != nil {
		b, err := io.ReadAll(in.Body)
		if err != nil {
			return nil, fmt.Errorf("s3 PutObject: read body: %w", err)
		}
		body = b
	}
	h := http.Header{}
	if in.ContentType != nil {
		h.Set("Content-Type", *in.ContentType)
	}
	resp, err := c.do(ctx, "PutObject", in, http.MethodPut, c.url(aws.ToString(in.Bucket), aws.ToString(in.Key), nil), body, h)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return &s3.PutObjectOutput{}, nil
}

func (c *Client) GetObject(ctx context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	resp, err := c.do(ctx, "GetObject", in, http.MethodGet, c.url(aws.ToString(in.Bucket), aws.ToString(in.Key), nil), nil, nil)
	if err != nil {
		return nil, err
	}
	return &s3.GetObjectOutput{Body: resp.Body, ContentLength: aws.Int64(resp.ContentLength)}, nil
}

func (c *Client) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	resp, err := c.do(ctx, "DeleteObject", in, http.MethodDelete, c.url(aws.ToString(in.Bucket), aws.ToString(in.Key), nil), nil, nil)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return &s3.DeleteObjectOutput{}, nil
}

func (c *Client) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	q := url.Values{"list-type": {"2"}}
	if in.Prefix != nil {
		q.Set("prefix", *in.Prefix)
	}
	if in.ContinuationToken != nil {
		q.Set("continuation-token", *in.ContinuationToken)
	}
	resp, err := c.do(ctx, "ListObjectsV2", in, http.MethodGet, c.url(aws.ToString(in.Bucket), "", q), nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var res struct {
		IsTruncated           bool    `xml:"IsTruncated"`
		NextContinuationToken *string `xml:"NextContinuationToken"`
		Contents              []struct {
			Key string `xml:"Key"`
		} `xml:"Contents"`
	}
	if err := xml.NewDecoder(resp.Body).Decode(&res); err != nil {
		return nil, fmt.Errorf("s3 ListObjectsV2: decode: %w", err)
	}
	out := &s3.ListObjectsV2Output{IsTruncated: aws.Bool(res.IsTruncated), NextContinuationToken: res.NextContinuationToken}
	for _, o := range res.Contents {
		out.Contents = append(out.Contents, types.Object{Key: aws.String(o.Key)})
	}
	return out, nil
}

func (c *Client) DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, _ ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error) {
	type object struct {
		Key string `xml:"Key"`
	}
	doc := struct {
		XMLName xml.Name `xml:"Delete"`
		Objects []object `xml:"Object"`
		Quiet   bool     `xml:"Quiet"`
	}{}
	if in.Delete != nil {
		doc.Quiet = aws.ToBool(in.Delete.Quiet)
		for _, o := range in.Delete.Objects {
			doc.Objects = append(doc.Objects, object{Key: aws.ToString(o.Key)})
		}
	}
	body, err := xml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("s3 DeleteObjects: %w", err)
	}
	// S3 refuses a multi-object delete without a checksum of its body.
	sum := md5.Sum(body)
	h := http.Header{"Content-Type": {"application/xml"}, "Content-Md5": {base64.StdEncoding.EncodeToString(sum[:])}}
	resp, err := c.do(ctx, "DeleteObjects", in, http.MethodPost, c.url(aws.ToString(in.Bucket), "", url.Values{"delete": {""}}), body, h)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var res struct {
		Errors []struct {
			Key     string `xml:"Key"`
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		} `xml:"Error"`
	}
	if err := xml.NewDecoder(resp.Body).Decode(&res); err != nil && err != io.EOF {
		return nil, fmt.Errorf("s3 DeleteObjects: decode: %w", err)
	}
	out := &s3.DeleteObjectsOutput{}
	for _, e := range res.Errors {
		out.Errors = append(out.Errors, types.Error{Key: aws.String(e.Key), Code: aws.String(e.Code), Message: aws.String(e.Message)})
	}
	return out, nil
}
