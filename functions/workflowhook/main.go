// Command workflowhook is the workflow builder webhook receiver Lambda
// function ({workflow_url}), behind a REST API proxy integration; it runs
// ON_COMPLETION flows inline.
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
	h, err := awsapp.Build(os.Getenv, awsapp.NewWorkflowHookHandler)
	if err != nil {
		log.Fatalf("workflowhook: %v", err)
	}
	lambda.Start(h)
}
