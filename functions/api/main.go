// Command api is the management API Lambda function ({base_url}), behind a
// REST API proxy integration.
//
// It reads its settings from the environment template.yaml sets, builds the
// handler once per cold start (pkg/awsapp/management) and serves invocations until the
// runtime stops it.
package main

import (
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
)

func main() {
	h, err := awsapp.Build(os.Getenv, management.NewHandler)
	if err != nil {
		log.Fatalf("api: %v", err)
	}
	lambda.Start(h)
}
