// Command webhook is the flow builder webhook receiver Lambda function
// ({engine_url}), behind a REST API proxy integration.
//
// It reads its settings from the environment template.yaml sets, builds the
// handler once per cold start (pkg/awsapp) and serves invocations until the
// runtime stops it.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"flowservice/pkg/awsapp"
)

func main() {
	ctx := context.Background()
	cfg, err := awsapp.ConfigFrom(os.Getenv)
	if err != nil {
		log.Fatalf("webhook: %v", err)
	}
	awsCfg, err := awsapp.AWSConfig(os.Getenv)
	if err != nil {
		log.Fatalf("webhook: aws config: %v", err)
	}
	h, err := awsapp.NewWebhookHandler(ctx, awsCfg, cfg)
	if err != nil {
		log.Fatalf("webhook: %v", err)
	}
	lambda.Start(h)
}
