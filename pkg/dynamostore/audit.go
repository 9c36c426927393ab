package dynamostore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// The audit table holds each project's entries under its project ID,
// sorted by automation.AuditSortKey (time, then ID), with expiresAt for
// the table's TTL: entries go after automation.AuditRetention. An entry is
// written in the TransactWriteItems of the change it records (audited).

const attrSortKey = "sortKey"

var _ automation.AuditStore = (*Store)(nil)

// auditItem is the write of an entry; overwriting it with itself is how a
// request's later writes leave it as it is (a condition would cancel them).
func (s *Store) auditItem(e automation.AuditEntry) (types.TransactWriteItem, error) {
	doc, err := json.Marshal(e)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("encode audit entry %s: %w", e.ID, err)
	}
	return types.TransactWriteItem{Put: &types.Put{TableName: &s.t.Audit, Item: map[string]types.AttributeValue{
		attrProject:   str(e.Project),
		attrSortKey:   str(automation.AuditSortKey(e)),
		attrID:        str(e.ID),
		"doc":         str(string(doc)),
		attrExpiresAt: num(e.Time.Add(automation.AuditRetention).Unix()),
	}}}, nil
}

// audited returns tx with the write of the entry ctx carries appended, or
// tx itself when it carries none or the store has no audit table (tools
// that administer without one). The entry goes last, so the indexes of
// tx's items in a cancellation's reasons are unchanged.
func (s *Store) audited(ctx context.Context, tx []types.TransactWriteItem) ([]types.TransactWriteItem, error) {
	e, ok := automation.AuditFrom(ctx)
	if !ok || s.t.Audit == "" {
		return tx, nil
	}
	w, err := s.auditItem(e)
	if err != nil {
		return nil, err
	}
	return append(tx[:len(tx):len(tx)], w), nil
}

// writeOne makes one conditional Put, Update or Delete, in a transaction with the
// audit entry when ctx carries one. It reports whether w's condition
// failed, as PutItem, UpdateItem and DeleteItem would.
func (s *Store) writeOne(ctx context.Context, w types.TransactWriteItem) (conditionFailedOnItem bool, err error) {
	tx, err := s.audited(ctx, []types.TransactWriteItem{w})
	if err != nil {
		return false, err
	}
	if len(tx) > 1 {
		_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
		if rs := cancelReasons(err); rs != nil && reasonCode(rs, 0) == reasonCondition {
			return true, nil
		}
		return false, err
	}
	switch {
	case w.Put != nil:
		p := w.Put
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: p.TableName, Item: p.Item,
			ConditionExpression: p.ConditionExpression, ExpressionAttributeNames: p.ExpressionAttributeNames,
			ExpressionAttributeValues: p.ExpressionAttributeValues})
	case w.Delete != nil:
		d := w.Delete
		_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: d.TableName, Key: d.Key,
			ConditionExpression: d.ConditionExpression, ExpressionAttributeNames: d.ExpressionAttributeNames,
			ExpressionAttributeValues: d.ExpressionAttributeValues})
	case w.Update != nil:
		u := w.Update
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key,
			UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
			ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues})
	default:
		return false, fmt.Errorf("writeOne: neither a put, an update nor a delete")
	}
	if _, ok := conditionFailed(err); ok {
		return true, nil
	}
	return false, err
}

// AppendAudit writes one entry on its own.
func (s *Store) AppendAudit(ctx context.Context, e automation.AuditEntry) error {
	w, err := s.auditItem(e)
	if err != nil {
		return fmt.Errorf("dynamostore: %w", err)
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.t.Audit, Item: w.Put.Item}); err != nil {
		return fmt.Errorf("dynamostore: append audit entry %s: %w", e.ID, err)
	}
	return nil
}

// AuditLog pages through a project's entries, newest first: one query on
// the table's key, bounded by since and until through the sort key.
func (s *Store) AuditLog(ctx context.Context, project string, q automation.AuditQuery) (automation.Page[automation.AuditEntry], error) {
	var page automation.Page[automation.AuditEntry]
	cond := "#p = :p"
	names := map[string]string{"#p": attrProject}
	values := map[string]types.AttributeValue{":p": str(project)}
	lo, hi := "", ""
	if !q.Since.IsZero() {
		lo = fmt.Sprintf("%015d", q.Since.UnixMilli())
	}
	if !q.Until.IsZero() {
		// Keys at until's millisecond are "<until>#id", above "<until>".
		hi = fmt.Sprintf("%015d", q.Until.UnixMilli())
	}
	switch {
	case lo != "" && hi != "":
		cond += " AND #s BETWEEN :lo AND :hi"
		values[":lo"], values[":hi"] = str(lo), str(hi)
	case lo != "":
		cond += " AND #s >= :lo"
		values[":lo"] = str(lo)
	case hi != "":
		cond += " AND #s < :hi"
		values[":hi"] = str(hi)
	}
	if lo != "" || hi != "" {
		names["#s"] = attrSortKey
	}
	in := &dynamodb.QueryInput{
		TableName: &s.t.Audit, KeyConditionExpression: &cond,
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ScanIndexForward: aws.Bool(false), ConsistentRead: aws.Bool(true),
	}
	if q.After != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{attrProject: str(project), attrSortKey: str(q.After)}
	}
	var keys []string
	for len(page.Items) <= q.Limit {
		in.Limit = aws.Int32(int32(q.Limit + 1 - len(page.Items)))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return page, fmt.Errorf("dynamostore: read audit log: %w", err)
		}
		for _, it := range out.Items {
			r := reader{item: it}
			doc, key := r.str("doc"), r.str(attrSortKey)
			if r.err != nil {
				return page, fmt.Errorf("dynamostore: decode audit entry: %w", r.err)
			}
			var e automation.AuditEntry
			if err := json.Unmarshal([]byte(doc), &e); err != nil {
				return page, fmt.Errorf("dynamostore: decode audit entry: %w", err)
			}
			e.Project = project
			page.Items = append(page.Items, e)
			keys = append(keys, key)
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if len(page.Items) > q.Limit {
		page.Items = page.Items[:q.Limit]
		page.Next = keys[q.Limit-1]
	}
	return page, nil
}
