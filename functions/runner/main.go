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
	"github.com/aws/aws-sdk-go-v2/aws"

	"flowservice/pkg/awsapp"
	"flowservice/pkg/fairshare"
	"flowservice/pkg/lambdacode"
)

func main() {
	h, err := awsapp.Build(os.Getenv, func(ctx context.Context, awsCfg aws.Config, cfg awsapp.Config) (awsapp.SQSHandler, error) {
		// CODE steps run in the code function, the one function that
		// carries the JavaScript engine.
		if fn := os.Getenv("CODE_FUNCTION"); fn != "" {
			cfg.Code = lambdacode.New(awsCfg, fn).WithShares(fairshare.New(lambdacode.DefaultInstanceSlots, 0))
		}
		return awsapp.NewRunnerHandler(ctx, awsCfg, cfg)
	})
	if err != nil {
		log.Fatalf("runner: %v", err)
	}
	lambda.Start(h)
}
