// Command api is the management API Lambda function ({base_url}), behind a
// REST API proxy integration.
//
// It reads its settings from the environment template.yaml sets, builds the
// handler once per cold start (pkg/awsapp/management) and serves invocations until the
// runtime stops it.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"

	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/lambdacode"
)

func main() {
	h, err := awsapp.Build(os.Getenv, func(ctx context.Context, awsCfg aws.Config, cfg awsapp.Config) (awsapp.ProxyHandler, error) {
		// CODE steps are compiled at save by the code function, the one
		// function that carries the JavaScript engine.
		if fn := os.Getenv("CODE_FUNCTION"); fn != "" {
			cfg.Code = lambdacode.New(awsCfg, fn)
		}
		return management.NewHandler(ctx, awsCfg, cfg)
	})
	if err != nil {
		log.Fatalf("api: %v", err)
	}
	lambda.Start(h)
}
