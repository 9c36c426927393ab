// Command runner is the Lambda function that consumes the run queue: it
// executes the runs SQS delivers and reports failures per message.
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
		log.Fatalf("runner: %v", err)
	}
	awsCfg, err := awsapp.AWSConfig(os.Getenv)
	if err != nil {
		log.Fatalf("runner: aws config: %v", err)
	}
	h, err := awsapp.NewRunnerHandler(ctx, awsCfg, cfg)
	if err != nil {
		log.Fatalf("runner: %v", err)
	}
	lambda.Start(h)
}
