package dynamostore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// Attributes of the OAuth2 apps table: one item per operator-wide app,
// keyed by its name. Its client secret is in Secrets Manager.
const (
	attrAppName      = "name"
	attrClientID     = "clientId"
	attrAuthorizeURL = "authorizeUrl"
	attrTokenURL     = "tokenUrl"
	attrScopes       = "scopes" // S, a JSON array
	attrAppCreated   = "created"
)

var _ automation.OAuthAppStore = (*Store)(nil)

func appKey(name string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrAppName: str(name)}
}

// PutOAuthApp creates an app; a second app of the same name is a conflict.
func (s *Store) PutOAuthApp(ctx context.Context, a automation.OAuthApp) error {
	scopes, err := json.Marshal(a.Scopes)
	if err != nil {
		return fmt.Errorf("dynamostore: put oauth app %s: %w", a.Name, err)
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.t.OAuthApps,
		Item: map[string]types.AttributeValue{
			attrAppName: str(a.Name), attrClientID: str(a.ClientID), attrAuthorizeURL: str(a.AuthorizeURL),
			attrTokenURL: str(a.TokenURL), attrScopes: str(string(scopes)), attrAppCreated: timeValue(a.Created),
		},
		ConditionExpression:      aws.String("attribute_not_exists(#name)"),
		ExpressionAttributeNames: map[string]string{"#name": attrAppName},
	})
	if _, ok := conditionFailed(err); ok {
		return &automation.Error{Kind: automation.ErrConflict, Code: "OAUTH_APP_EXISTS", Message: "an OAuth2 app named " + a.Name + " exists"}
	} else if err != nil {
		return fmt.Errorf("dynamostore: put oauth app %s: %w", a.Name, err)
	}
	return nil
}

// OAuthApp returns the app of that name.
func (s *Store) OAuthApp(ctx context.Context, name string) (automation.OAuthApp, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.OAuthApps, Key: appKey(name), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return automation.OAuthApp{}, fmt.Errorf("dynamostore: get oauth app %s: %w", name, err)
	}
	if len(out.Item) == 0 {
		return automation.OAuthApp{}, automation.NotFound("oauth app", name)
	}
	return decodeOAuthApp(out.Item)
}

// OAuthApps lists every app by name: a scan, as an operator keeps a few.
func (s *Store) OAuthApps(ctx context.Context) ([]automation.OAuthApp, error) {
	apps := []automation.OAuthApp{}
	for p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{TableName: &s.t.OAuthApps, ConsistentRead: aws.Bool(true)}); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamostore: list oauth apps: %w", err)
		}
		for _, it := range out.Items {
			a, err := decodeOAuthApp(it)
			if err != nil {
				return nil, err
			}
			apps = append(apps, a)
		}
	}
	sort.Slice(apps, func(i, j int) bool { return apps[i].Name < apps[j].Name })
	return apps, nil
}

// DeleteOAuthApp removes the app of that name.
func (s *Store) DeleteOAuthApp(ctx context.Context, name string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &s.t.OAuthApps, Key: appKey(name),
		ConditionExpression:      aws.String("attribute_exists(#name)"),
		ExpressionAttributeNames: map[string]string{"#name": attrAppName},
	})
	if _, ok := conditionFailed(err); ok {
		return automation.NotFound("oauth app", name)
	} else if err != nil {
		return fmt.Errorf("dynamostore: delete oauth app %s: %w", name, err)
	}
	return nil
}

func decodeOAuthApp(item map[string]types.AttributeValue) (automation.OAuthApp, error) {
	r := reader{item: item}
	a := automation.OAuthApp{
		Name: r.str(attrAppName), ClientID: r.str(attrClientID), AuthorizeURL: r.str(attrAuthorizeURL),
		TokenURL: r.str(attrTokenURL), Created: r.time(attrAppCreated),
	}
	scopes := r.str(attrScopes)
	if r.err == nil {
		r.err = json.Unmarshal([]byte(scopes), &a.Scopes)
	}
	if r.err != nil {
		return automation.OAuthApp{}, fmt.Errorf("dynamostore: decode oauth app %s: %w", a.Name, r.err)
	}
	return a, nil
}
