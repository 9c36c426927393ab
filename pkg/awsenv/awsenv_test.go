package awsenv

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestConfig: the region, the role's credentials and an emulator's
// endpoint come from the variables Lambda sets; AWS_DEFAULT_REGION stands
// in for AWS_REGION; missing credentials are an error.
func TestConfig(t *testing.T) {
	type got struct {
		Region, Endpoint, KeyID, Secret, Token string
	}
	read := func(t *testing.T, cfg aws.Config) got {
		t.Helper()
		creds, err := cfg.Credentials.Retrieve(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return got{cfg.Region, aws.ToString(cfg.BaseEndpoint), creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken}
	}
	tests := []struct {
		name string
		env  map[string]string
		want got
	}{
		{"lambda with an emulator", map[string]string{
			"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
			"AWS_SESSION_TOKEN": "token", "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
		}, got{"eu-west-1", "http://127.0.0.1:5000", "AKIDEXAMPLE", "secret", "token"}},
		{"default region, no session", map[string]string{
			"AWS_DEFAULT_REGION": "us-east-2", "AWS_ACCESS_KEY_ID": "AKID2", "AWS_SECRET_ACCESS_KEY": "s2",
		}, got{"us-east-2", "", "AKID2", "s2", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Config(env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, read(t, cfg)); diff != "" {
				t.Errorf("config mismatch (-want +got):\n%s", diff)
			}
		})
	}
	for _, missing := range []string{"AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		e := map[string]string{"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s"}
		delete(e, missing)
		if _, err := Config(env(e)); err == nil {
			t.Errorf("without %s: no error", missing)
		}
	}
}
