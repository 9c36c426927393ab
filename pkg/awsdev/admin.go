package awsdev

import (
	"crypto/rand"
	"flowservice/pkg/apps"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"flowservice/pkg/automation"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/engine"
	"flowservice/pkg/smsecrets"
)

// NewAdminService builds a Service for administration (projects and API
// keys, as flowctl does) on a stage's tables: no queue, no scheduler, no
// cursors. tablePrefix is what template.yaml names the tables with,
// flow-<stage>.
func NewAdminService(awsCfg aws.Config, tablePrefix string) (*automation.Service, error) {
	store := dynamostore.New(dynamodb.NewFromConfig(awsCfg), dynamostore.TableNames(tablePrefix))
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	svc, err := automation.NewService(automation.Config{
		Store: store, Secrets: smsecrets.New(secretsmanager.NewFromConfig(awsCfg), SecretPrefix(tablePrefix)),
		Checker: engine.Checker{}, CursorKey: key, OAuthApps: store, Polls: store, Users: store, Apps: apps.MustLoad(),
	})
	if err != nil {
		return nil, fmt.Errorf("awsdev: %w", err)
	}
	return svc, nil
}

// SecretPrefix is where a stage's functions keep connection credentials,
// flow/<stage> (SECRET_PREFIX in template.yaml), for its table prefix
// flow-<stage>.
func SecretPrefix(tablePrefix string) string {
	return "flow/" + strings.TrimPrefix(tablePrefix, "flow-")
}
