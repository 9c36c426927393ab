// Package awsenv builds the AWS SDK configuration of a Lambda function from
// its environment, without the SDK's config loader (see Config for why).
// The functions (through pkg/awsapp.Build) and the deploy tools use it.
package awsenv

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Config returns the SDK configuration of a Lambda function from the
// variables the Lambda runtime sets: AWS_REGION and the execution role's
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, which
// stay valid for the life of the execution environment. AWS_ENDPOINT_URL,
// when set, sends every client to one endpoint (a local emulator).
//
// It stands in for config.LoadDefaultConfig, whose chain ends at the same
// environment credentials on Lambda but links in shared config files, SSO,
// STS and instance metadata, about 2 MB of each bootstrap that a function
// never runs.
func Config(getenv func(string) string) (aws.Config, error) {
	region := getenv("AWS_REGION")
	if region == "" {
		region = getenv("AWS_DEFAULT_REGION")
	}
	id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	if region == "" || id == "" || secret == "" {
		return aws.Config{}, fmt.Errorf("awsenv: AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set, as the Lambda runtime sets them")
	}
	cfg := aws.Config{
		Region:      region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(id, secret, getenv("AWS_SESSION_TOKEN"))),
	}
	if ep := getenv("AWS_ENDPOINT_URL"); ep != "" {
		cfg.BaseEndpoint = aws.String(ep)
	}
	return cfg, nil
}
