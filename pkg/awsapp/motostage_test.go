package awsapp_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/awstest"
)

// motoStage is a stage provisioned on a moto_server of the test's own,
// with one ENTERPRISE project "acme" and its API key: what the handler
// tests on moto start from.
type motoStage struct {
	AWS    aws.Config
	Cfg    awsapp.Config // the stage's settings, as the functions read them
	Prefix string        // of its tables and secrets
	Key    string        // the project's API key
}

// newMotoStage provisions a stage named after name with base's settings.
func newMotoStage(t *testing.T, name string, base awsapp.Config) motoStage {
	t.Helper()
	ctx := context.Background()
	st := motoStage{AWS: awstest.Start(t), Prefix: awstest.UniqueName(t, name)}
	var err error
	if st.Cfg, err = awsdev.Provision(ctx, st.AWS, st.Prefix, base); err != nil {
		t.Fatal(err)
	}
	admin, err := awsdev.NewAdminService(st.AWS, st.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	project, err := admin.CreateProject(ctx, "acme", automation.PlanEnterprise)
	if err != nil {
		t.Fatal(err)
	}
	if st.Key, _, err = admin.CreateAPIKey(ctx, project.ID); err != nil {
		t.Fatal(err)
	}
	return st
}
