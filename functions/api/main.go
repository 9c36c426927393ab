// Command api is the management API Lambda function ({base_url}), behind a
// REST API proxy integration.
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
		log.Fatalf("api: %v", err)
	}
	awsCfg, err := awsapp.AWSConfig(os.Getenv)
	if err != nil {
		log.Fatalf("api: aws config: %v", err)
	}
	h, err := awsapp.NewAPIHandler(ctx, awsCfg, cfg)
	if err != nil {
		log.Fatalf("api: %v", err)
	}
	lambda.Start(h)
}
