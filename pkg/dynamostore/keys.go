package dynamostore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// The keys table holds each key twice: the record under "hash#<hash>", so
// that authentication is one strongly consistent read by the hash it has,
// and a pointer under "key#<id>", so that revocation by ID is strongly
// consistent too (a key revoked must fail its very next request).

func keyHashKey(hash string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str("hash#" + hash)}
}

func keyIDKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str("key#" + id)}
}

// CreateKey stores a key's record and its ID pointer in one transaction.
func (s *Store) CreateKey(ctx context.Context, k automation.APIKey) error {
	rec := keyHashKey(k.Hash)
	rec[attrID] = str(k.ID)
	rec[attrProject] = str(k.Project)
	rec["hash"] = str(k.Hash)
	rec["prefix"] = str(k.Prefix)
	rec["created"] = timeValue(k.Created)
	rec["role"] = str(string(k.Role))
	if k.Role == "" {
		rec["role"] = str(string(automation.RoleAdmin))
	}
	rec[attrCreatedSort] = str(createdSort(k.Created, k.ID))
	if k.User != "" {
		rec["userId"] = str(k.User)
	}
	if k.Revoked != nil {
		rec["revoked"] = timeValue(*k.Revoked)
	}
	ptr := keyIDKey(k.ID)
	ptr["hash"] = str(k.Hash)
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.t.Keys, Item: rec, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		{Put: &types.Put{TableName: &s.t.Keys, Item: ptr, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
	}})
	if rs := cancelReasons(err); rs != nil && (reasonCode(rs, 0) == reasonCondition || reasonCode(rs, 1) == reasonCondition) {
		return automation.Conflict("KEY_EXISTS", "API key %s already exists", k.ID)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: create key %s: %w", k.ID, err)
	}
	return nil
}

// KeyByHash reads a key record by the hash of the key.
func (s *Store) KeyByHash(ctx context.Context, hash string) (automation.APIKey, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Keys, Key: keyHashKey(hash), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		// The hash identifies a credential: name the lookup, not the hash.
		return automation.APIKey{}, fmt.Errorf("dynamostore: get key by hash: %w", err)
	}
	if len(out.Item) == 0 {
		return automation.APIKey{}, automation.NotFound("API key", "(by hash)")
	}
	return decodeKey(out.Item)
}

// Keys lists the keys of a project through the byProject index, or of all
// projects through a scan.
func (s *Store) Keys(ctx context.Context, project string) ([]automation.APIKey, error) {
	var items []map[string]types.AttributeValue
	var err error
	if project == "" {
		items, err = s.scanAll(ctx, &dynamodb.ScanInput{
			TableName:                 &s.t.Keys,
			FilterExpression:          aws.String("begins_with(pk, :h)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":h": str("hash#")},
			ConsistentRead:            aws.Bool(true),
		})
		slices.SortFunc(items, byCreatedSort)
	} else {
		items, err = s.queryAll(ctx, &dynamodb.QueryInput{
			TableName: &s.t.Keys, IndexName: aws.String(indexByProject),
			KeyConditionExpression:    aws.String("#p = :p"),
			ExpressionAttributeNames:  map[string]string{"#p": attrProject},
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(project)},
		})
	}
	if err == nil && project != "" {
		items, err = s.keyRecords(ctx, items)
	}
	if err != nil {
		return nil, fmt.Errorf("dynamostore: list keys of %q: %w", project, err)
	}
	ks := make([]automation.APIKey, 0, len(items))
	for _, it := range items {
		k, err := decodeKey(it)
		if err != nil {
			return nil, err
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// keyRecords reads the whole records behind byProject index entries. The
// index projects only the attributes keys had before roles, and a GSI's
// projection cannot change in place; a project has few keys and listing
// them is an operator's command, so one read per key costs nothing that
// matters.
func (s *Store) keyRecords(ctx context.Context, entries []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	out := make([]map[string]types.AttributeValue, 0, len(entries))
	for _, e := range entries {
		r := reader{item: e}
		hash := r.str("hash")
		if r.err != nil {
			return nil, r.err
		}
		got, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: &s.t.Keys, Key: keyHashKey(hash), ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return nil, err
		}
		if len(got.Item) > 0 { // deleted since the index was read
			out = append(out, got.Item)
		}
	}
	return out, nil
}

// RevokeKey follows the ID pointer and sets revoked once: a key revoked
// earlier keeps its first revocation time.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) error {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Keys, Key: keyIDKey(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("dynamostore: revoke key %s: %w", id, err)
	}
	r := reader{item: out.Item}
	hash := r.str("hash")
	if r.err != nil {
		return fmt.Errorf("dynamostore: revoke key %s: %w", id, r.err)
	}
	if hash == "" {
		return automation.NotFound("API key", id)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Keys, Key: keyHashKey(hash),
		UpdateExpression:          aws.String("SET revoked = :at"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND attribute_not_exists(revoked)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":at": timeValue(at)},
	})
	if _, ok := conditionFailed(err); ok {
		// Revoked already, or the record is gone: only a read tells which.
		k, err := s.KeyByHash(ctx, hash)
		if automation.IsNotFound(err) {
			return automation.NotFound("API key", id)
		} else if err != nil {
			return fmt.Errorf("dynamostore: revoke key %s: %w", id, err)
		}
		if k.Revoked == nil {
			return fmt.Errorf("dynamostore: revoke key %s: condition failed on a key that is not revoked", id)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("dynamostore: revoke key %s: %w", id, err)
	}
	return nil
}

func decodeKey(item map[string]types.AttributeValue) (automation.APIKey, error) {
	r := reader{item: item}
	k := automation.APIKey{
		ID: r.str(attrID), Project: r.str(attrProject), Hash: r.str("hash"), Prefix: r.str("prefix"),
		Created: r.time("created"), Revoked: r.timePtr("revoked"), Role: automation.Role(r.str("role")),
		User: r.str("userId"),
	}
	if k.Role == "" {
		// Written before keys had roles: every such key could do everything.
		k.Role = automation.RoleAdmin
	}
	if r.err != nil {
		return automation.APIKey{}, fmt.Errorf("dynamostore: decode key %s: %w", k.ID, r.err)
	}
	return k, nil
}
