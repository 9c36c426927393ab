// Command samenv writes the env-vars file of `sam local invoke` (see
// deploy/samenv), for `make invoke-<function>`:
//
//	samenv -stack-json stack.json -o env.json   # describe-stacks output of a deployed stack
//	samenv -moto local -o env.json              # provision on moto_server (AWS_ENDPOINT_URL)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"flowservice/deploy/samenv"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/awsenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "samenv:", err)
		os.Exit(1)
	}
}

func run() error {
	tplPath := flag.String("template", "template.yaml", "the SAM template")
	stackJSON := flag.String("stack-json", "", "output of `aws cloudformation describe-stacks --stack-name NAME`")
	moto := flag.String("moto", "", "provision this stage's resources (flow-<stage>-...) on AWS_ENDPOINT_URL (moto_server) and use them")
	endpoint := flag.String("container-endpoint", "", "with -moto: AWS_ENDPOINT_URL as the function's container reaches the emulator (default: AWS_ENDPOINT_URL with 127.0.0.1 as host.docker.internal)")
	out := flag.String("o", "", "write the env-vars file here (default stdout)")
	flag.Parse()

	src, err := os.ReadFile(*tplPath)
	if err != nil {
		return err
	}
	tpl, err := samenv.Parse(src)
	if err != nil {
		return err
	}
	var vals samenv.Values
	extra := map[string]string{}
	switch {
	case *stackJSON != "":
		raw, err := os.ReadFile(*stackJSON)
		if err != nil {
			return err
		}
		if vals, err = tpl.FromStack(raw); err != nil {
			return err
		}
	case *moto != "":
		ep := os.Getenv("AWS_ENDPOINT_URL")
		if ep == "" {
			return fmt.Errorf("-moto needs AWS_ENDPOINT_URL (the moto_server's address)")
		}
		awsCfg, err := awsenv.Config(os.Getenv)
		if err != nil {
			return err
		}
		prefix := "flow-" + *moto
		cfg, err := awsdev.Provision(context.Background(), awsCfg, prefix, awsapp.Config{SecretPrefix: awsdev.SecretPrefix(prefix)})
		if err != nil {
			return err
		}
		vals = tpl.FromConfig(cfg, *moto, awsCfg.Region, "123456789012")
		extra["AWS_ENDPOINT_URL"] = *endpoint
		if *endpoint == "" {
			extra["AWS_ENDPOINT_URL"] = strings.Replace(ep, "127.0.0.1", "host.docker.internal", 1)
		}
	default:
		return fmt.Errorf("give -stack-json FILE or -moto PREFIX")
	}
	env, err := tpl.Env(vals, extra)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = os.Stdout.Write(append(b, '\n'))
		return err
	}
	return os.WriteFile(*out, append(b, '\n'), 0o600)
}
