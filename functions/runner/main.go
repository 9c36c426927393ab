// Command runner is the Lambda function that consumes the run queue: it
// executes the runs SQS delivers and reports failures per message.
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
	h, err := awsapp.Build(os.Getenv, awsapp.NewRunnerHandler)
	if err != nil {
		log.Fatalf("runner: %v", err)
	}
	lambda.Start(h)
}
