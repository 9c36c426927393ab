// Command code is the Lambda function that runs the JavaScript of CODE
// steps for the runner and the workflow builder receiver, which invoke it
// (pkg/lambdacode). It is the only function that carries the JavaScript
// engine. Inside it, each script runs in a child process of this same
// binary with hard rlimits, killed at its timeout (pkg/sandbox), so a
// hostile script cannot take the function's memory or hang it.
package main

import (
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"flowservice/pkg/jscode"
	"flowservice/pkg/lambdacode"
	"flowservice/pkg/sandbox"
)

func main() {
	// A copy of this binary started by the pool serves scripts instead.
	sandbox.MaybeServe()
	// An execution environment handles one invocation at a time: one warm
	// child is enough.
	pool, err := sandbox.New(sandbox.Config{Idle: 1, Max: 1})
	if err != nil {
		log.Fatalf("code: %v", err)
	}
	// The api function's syntax checks compile with the sandbox's wrapper.
	lambda.Start(lambdacode.Handler(pool, jscode.Check))
}
