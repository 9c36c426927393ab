// Command webhook is the flow builder webhook receiver Lambda function
// ({engine_url}), behind a REST API proxy integration.
//
// It reads its settings from the environment template.yaml sets, builds the
// handler once per cold start (pkg/awsapp) and serves invocations until the
// runtime stops it.
package main

import (
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"flowservice/pkg/awsapp"
)

func main() {
	h, err := awsapp.Build(os.Getenv, awsapp.NewWebhookHandler)
	if err != nil {
		log.Fatalf("webhook: %v", err)
	}
	lambda.Start(h)
}
