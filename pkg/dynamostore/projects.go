package dynamostore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// Attributes of the projects and keys tables, whose single key attribute pk
// holds a typed key: "project#<id>", "name#<name>", "key#<id>", "hash#<hash>".
const (
	attrPK        = "pk"
	attrID        = "id"
	attrProject   = "project"
	attrProjectID = "projectId"
)

func projectKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str("project#" + id)}
}

func projectNameKey(name string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str("name#" + name)}
}

// CreateProject stores p and reserves its name in one transaction: the name
// item makes names unique without a scan.
func (s *Store) CreateProject(ctx context.Context, p automation.Project) error {
	item := projectKey(p.ID)
	item[attrID] = str(p.ID)
	item["name"] = str(p.Name)
	item["plan"] = str(string(p.Plan))
	item["created"] = timeValue(p.Created)
	item[attrCreatedSort] = str(createdSort(p.Created, p.ID))
	name := projectNameKey(p.Name)
	name[attrProjectID] = str(p.ID)
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.t.Projects, Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		{Put: &types.Put{TableName: &s.t.Projects, Item: name, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
	}})
	if rs := cancelReasons(err); rs != nil {
		switch {
		case reasonCode(rs, 1) == reasonCondition:
			return automation.Conflict("PROJECT_EXISTS", "a project named %q already exists", p.Name)
		case reasonCode(rs, 0) == reasonCondition:
			return automation.Conflict("PROJECT_EXISTS", "project %s already exists", p.ID)
		}
	}
	if err != nil {
		return fmt.Errorf("dynamostore: create project %s: %w", p.Name, err)
	}
	return nil
}

// Project reads a project by ID.
func (s *Store) Project(ctx context.Context, id string) (automation.Project, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Projects, Key: projectKey(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return automation.Project{}, fmt.Errorf("dynamostore: get project %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return automation.Project{}, automation.NotFound("project", id)
	}
	return decodeProject(out.Item)
}

// ProjectByName follows the name reservation to the project.
func (s *Store) ProjectByName(ctx context.Context, name string) (automation.Project, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Projects, Key: projectNameKey(name), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return automation.Project{}, fmt.Errorf("dynamostore: find project %s: %w", name, err)
	}
	r := reader{item: out.Item}
	id := r.str(attrProjectID)
	if r.err != nil {
		return automation.Project{}, fmt.Errorf("dynamostore: find project %s: %w", name, r.err)
	}
	if id == "" {
		return automation.Project{}, automation.NotFound("project", name)
	}
	p, err := s.Project(ctx, id)
	if automation.IsNotFound(err) {
		return automation.Project{}, automation.NotFound("project", name)
	}
	return p, err
}

// Projects scans for the project items: projects are few and listed only by
// operators, so a scan costs less than an index every write would pay for.
func (s *Store) Projects(ctx context.Context) ([]automation.Project, error) {
	items, err := s.scanAll(ctx, &dynamodb.ScanInput{
		TableName:                 &s.t.Projects,
		FilterExpression:          aws.String("begins_with(pk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": str("project#")},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: list projects: %w", err)
	}
	slices.SortFunc(items, byCreatedSort)
	ps := make([]automation.Project, 0, len(items))
	for _, it := range items {
		p, err := decodeProject(it)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func decodeProject(item map[string]types.AttributeValue) (automation.Project, error) {
	r := reader{item: item}
	p := automation.Project{
		ID: r.str(attrID), Name: r.str("name"), Plan: automation.Plan(r.str("plan")), Created: r.time("created"),
	}
	if r.err != nil {
		return automation.Project{}, fmt.Errorf("dynamostore: decode project %s: %w", p.ID, r.err)
	}
	var err error
	if p.LimitOverrides, err = decodeLimits(item); err != nil {
		return automation.Project{}, fmt.Errorf("dynamostore: decode project %s: %w", p.ID, err)
	}
	return p, nil
}

// byCreatedSort orders items of a scan as an index on createdSort would.
func byCreatedSort(a, b map[string]types.AttributeValue) int {
	ra, rb := reader{item: a}, reader{item: b}
	return cmp.Compare(ra.str(attrCreatedSort), rb.str(attrCreatedSort))
}
