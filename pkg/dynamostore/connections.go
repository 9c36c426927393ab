package dynamostore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// attrAllowedHosts is a connection's allowedHosts, a list of strings;
// absent for none.
const attrAllowedHosts = "allowedHosts"

// attrBaseURL is an app connection's baseUrl; absent for none.
const attrBaseURL = "baseUrl"

func connectionKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrID: str(id)}
}

// CreateConnection stores a connection's metadata; its credential is in
// Secrets.
func (s *Store) CreateConnection(ctx context.Context, c automation.Connection) error {
	item := connectionKey(c.ID)
	item[attrProject] = str(c.Project)
	item["name"] = str(c.Name)
	item["app"] = str(c.App)
	item["type"] = str(string(c.Type))
	item["status"] = str(string(c.Status))
	item["created"] = timeValue(c.Created)
	item["updated"] = timeValue(c.Updated)
	item[attrCreatedSort] = str(createdSort(c.Created, c.ID))
	if len(c.AllowedHosts) > 0 {
		hosts := make([]types.AttributeValue, len(c.AllowedHosts))
		for i, h := range c.AllowedHosts {
			hosts[i] = str(h)
		}
		item[attrAllowedHosts] = &types.AttributeValueMemberL{Value: hosts}
	}
	if c.BaseURL != "" {
		item[attrBaseURL] = str(c.BaseURL)
	}
	failed, err := s.writeOne(ctx, types.TransactWriteItem{Put: &types.Put{
		TableName: &s.t.Connections, Item: item, ConditionExpression: aws.String("attribute_not_exists(id)"),
	}})
	if failed {
		return automation.Conflict("CONNECTION_EXISTS", "connection %s already exists", c.ID)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: create connection %s: %w", c.ID, err)
	}
	return nil
}

// Connection reads a connection by ID, strongly consistent, because the
// engine checks it before every use of its credential.
func (s *Store) Connection(ctx context.Context, project, id string) (automation.Connection, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Connections, Key: connectionKey(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return automation.Connection{}, fmt.Errorf("dynamostore: get connection %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return automation.Connection{}, automation.NotFound("connection", id)
	}
	c, err := decodeConnection(out.Item)
	if err != nil {
		return automation.Connection{}, err
	}
	if c.Project != project {
		return automation.Connection{}, automation.NotFound("connection", id)
	}
	return c, nil
}

// ListConnections pages through a project's connections in creation order.
func (s *Store) ListConnections(ctx context.Context, project string, q automation.ListQuery) (automation.Page[automation.Connection], error) {
	items, next, err := s.listPage(ctx, s.t.Connections, indexByProject, attrProject, project, q, true)
	if err != nil {
		return automation.Page[automation.Connection]{}, fmt.Errorf("dynamostore: list connections of %s: %w", project, err)
	}
	// The index projects what connections had before allowedHosts, and a
	// GSI's projection cannot change in place: read the page's items.
	if items, err = s.batchGet(ctx, s.t.Connections, items); err != nil {
		return automation.Page[automation.Connection]{}, fmt.Errorf("dynamostore: list connections of %s: %w", project, err)
	}
	page := automation.Page[automation.Connection]{Items: make([]automation.Connection, 0, len(items)), Next: next}
	for _, it := range items {
		c, err := decodeConnection(it)
		if err != nil {
			return automation.Page[automation.Connection]{}, err
		}
		page.Items = append(page.Items, c)
	}
	return page, nil
}

// DeleteConnection deletes a connection of the project; the condition makes
// a connection of another project as missing as an absent one.
func (s *Store) DeleteConnection(ctx context.Context, project, id string) error {
	failed, err := s.writeOne(ctx, types.TransactWriteItem{Delete: &types.Delete{
		TableName: &s.t.Connections, Key: connectionKey(id),
		ConditionExpression:       aws.String("#project = :project"),
		ExpressionAttributeNames:  map[string]string{"#project": attrProject},
		ExpressionAttributeValues: map[string]types.AttributeValue{":project": str(project)},
	}})
	if failed {
		return automation.NotFound("connection", id)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: delete connection %s: %w", id, err)
	}
	return nil
}

// SetConnectionStatus records a state change in place.
func (s *Store) SetConnectionStatus(ctx context.Context, project, id string, st automation.ConnectionStatus, at time.Time) error {
	update := func() *types.Update {
		return &types.Update{
			TableName: &s.t.Connections, Key: connectionKey(id),
			UpdateExpression:         aws.String("SET #status = :status, #updated = :updated"),
			ConditionExpression:      aws.String("#project = :project"),
			ExpressionAttributeNames: map[string]string{"#status": "status", "#updated": "updated", "#project": attrProject},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":status": str(string(st)), ":updated": timeValue(at), ":project": str(project),
			},
		}
	}
	// With the event, when a subscription wants it (alerts.go).
	if done, err := s.setConnectionStatusWithEvent(ctx, update(), project, id, st); done || err != nil {
		return err
	}
	// A re-authorization from the dashboard records its audit entry here.
	failed, err := s.writeOne(ctx, types.TransactWriteItem{Update: update()})
	if failed {
		return automation.NotFound("connection", id)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: set status of connection %s: %w", id, err)
	}
	return nil
}

func decodeConnection(item map[string]types.AttributeValue) (automation.Connection, error) {
	r := reader{item: item}
	c := automation.Connection{
		ID: r.str(attrID), Project: r.str(attrProject), Name: r.str("name"), App: r.str("app"),
		Type: automation.ConnectionType(r.str("type")), Status: automation.ConnectionStatus(r.str("status")),
		Created: r.time("created"), Updated: r.time("updated"),
	}
	if v, ok := item[attrBaseURL].(*types.AttributeValueMemberS); ok {
		c.BaseURL = v.Value
	}
	if r.err != nil {
		return automation.Connection{}, fmt.Errorf("dynamostore: decode connection %s: %w", c.ID, r.err)
	}
	if l, ok := item[attrAllowedHosts].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			h, ok := v.(*types.AttributeValueMemberS)
			if !ok {
				return automation.Connection{}, fmt.Errorf("dynamostore: decode connection %s: allowedHosts holds a %T", c.ID, v)
			}
			c.AllowedHosts = append(c.AllowedHosts, h.Value)
		}
	}
	return c, nil
}
