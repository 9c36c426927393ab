package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// A flow's versions and draft are items of the samples table, beside its
// Test Trigger state and STORE state:
//
//   - "version#<flowId>#<n>": one per published version, written in the
//     flow's own transaction and never changed: project, version, created,
//     message, createdBy and the definition as native maps and lists, as
//     the flow item holds it. A definition takes no more room there than in
//     the flow item, which flowTooLarge keeps under the item limit, so a
//     version always fits in its item.
//   - "draft#<flowId>": the draft, with basedOn, updated and its
//     definition, checked against the item limit when saved.
//
// Versions are numbered 1 to the flow's live version with no gaps, so a
// page of them, newest first, is one BatchGetItem of known keys.
const (
	attrLiveVersion = "liveVersion" // flows: the live version number
	attrHasDraft    = "hasDraft"    // flows: BOOL
	attrDefinition  = "definition"  // versions and drafts
	attrBasedOn     = "basedOn"
)

var _ automation.VersionStore = (*Store)(nil)

func versionKey(flowID string, n int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrFlowID: str("version#" + flowID + "#" + strconv.FormatInt(n, 10))}
}

func draftKey(flowID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrFlowID: str("draft#" + flowID)}
}

// versionWrites are the transaction items of what a flow write carries
// beside the flow (automation.VersionWrites); a version number taken
// already fails its condition.
func (s *Store) versionWrites(f automation.Flow) ([]types.TransactWriteItem, error) {
	var tx []types.TransactWriteItem
	for _, v := range f.Publish {
		def, err := defEncoder.Encode(v.Definition)
		if err != nil {
			return nil, fmt.Errorf("encode version %d: %w", v.Version, err)
		}
		item := versionKey(f.ID, v.Version)
		item[attrProject] = str(f.Project)
		item[attrVersion] = num(v.Version)
		item["created"] = timeValue(v.Created)
		item["message"] = str(v.Message)
		item["createdBy"] = str(v.CreatedBy)
		item[attrDefinition] = def
		tx = append(tx, types.TransactWriteItem{Put: &types.Put{
			TableName: &s.t.Samples, Item: item,
			ConditionExpression:      aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": attrFlowID},
		}})
	}
	if f.DropDraft && f.SaveDraft == nil {
		tx = append(tx, types.TransactWriteItem{Delete: &types.Delete{TableName: &s.t.Samples, Key: draftKey(f.ID)}})
	}
	if d := f.SaveDraft; d != nil {
		def, err := defEncoder.Encode(d.Definition)
		if err != nil {
			return nil, fmt.Errorf("encode draft: %w", err)
		}
		item := draftKey(f.ID)
		item[attrProject] = str(f.Project)
		item[attrBasedOn] = num(d.BasedOn)
		item["updated"] = timeValue(d.Updated)
		item[attrDefinition] = def
		if size := ItemSize(item) + flowItemReserve; size > MaxItemSize {
			return nil, automation.InvalidCode("FLOW_TOO_LARGE",
				"the draft of flow %q takes %d bytes stored, over the %d a flow may take: move large constants out of its steps", f.Name, size, MaxItemSize)
		}
		tx = append(tx, types.TransactWriteItem{Put: &types.Put{TableName: &s.t.Samples, Item: item}})
	}
	return tx, nil
}

// versionsConflict tells whether the cancellation reasons of a flow write
// whose version items start at index from name a version taken already:
// another publish got the number first.
func versionsConflict(rs []types.CancellationReason, from, n int) bool {
	for i := from; i < from+n; i++ {
		if reasonCode(rs, i) == reasonCondition {
			return true
		}
	}
	return false
}

// FlowVersion reads one version of a flow (consistent).
func (s *Store) FlowVersion(ctx context.Context, project, flowID string, n int64) (automation.FlowVersion, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Samples, Key: versionKey(flowID, n), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return automation.FlowVersion{}, fmt.Errorf("dynamostore: get version %d of flow %s: %w", n, flowID, err)
	}
	if len(out.Item) == 0 || (&reader{item: out.Item}).str(attrProject) != project {
		return automation.FlowVersion{}, automation.NotFound("version", strconv.FormatInt(n, 10))
	}
	return decodeVersion(flowID, out.Item, true)
}

func decodeVersion(flowID string, item map[string]types.AttributeValue, withDef bool) (automation.FlowVersion, error) {
	r := reader{item: item}
	v := automation.FlowVersion{
		FlowID: flowID, Project: r.str(attrProject), Version: r.int(attrVersion), Created: r.time("created"),
		Message: r.str("message"), CreatedBy: r.str("createdBy"),
	}
	if r.err == nil && withDef {
		v.Definition = &automation.Definition{}
		if av, ok := item[attrDefinition]; ok {
			r.err = defDecoder.Decode(av, v.Definition)
		}
	}
	if r.err != nil {
		return automation.FlowVersion{}, fmt.Errorf("dynamostore: decode version %d of flow %s: %w", v.Version, flowID, r.err)
	}
	return v, nil
}

// FlowVersions reads a page of a flow's versions, newest first: the flow
// says its live version, and the page is the numbers below the position
// (the last number returned), read in one BatchGetItem.
func (s *Store) FlowVersions(ctx context.Context, project, flowID string, q automation.ListQuery) (automation.Page[automation.FlowVersion], error) {
	var page automation.Page[automation.FlowVersion]
	f, err := s.Flow(ctx, project, flowID)
	if automation.IsNotFound(err) {
		return page, nil
	} else if err != nil {
		return page, err
	}
	top := max(f.LiveVersion, 1)
	if q.After != "" {
		n, err := strconv.ParseInt(q.After, 10, 64)
		if err != nil || n < 1 {
			return page, automation.InvalidCode("INVALID_CURSOR", "list position %q is not valid", q.After)
		}
		top = min(top, n-1)
	}
	limit := int64(max(q.Limit, 1))
	var keys []map[string]types.AttributeValue
	for n := top; n >= 1 && n > top-limit; n-- {
		keys = append(keys, versionKey(flowID, n))
	}
	items, err := s.getSamples(ctx, keys)
	if err != nil {
		return page, fmt.Errorf("dynamostore: list versions of flow %s: %w", flowID, err)
	}
	for _, it := range items {
		if (&reader{item: it}).str(attrProject) != project {
			continue
		}
		v, err := decodeVersion(flowID, it, false)
		if err != nil {
			return page, err
		}
		page.Items = append(page.Items, v)
	}
	slices.SortFunc(page.Items, func(a, b automation.FlowVersion) int { return int(b.Version - a.Version) })
	if last := top - limit + 1; last > 1 && len(keys) > 0 {
		page.Next = strconv.FormatInt(last, 10)
	}
	return page, nil
}

// getSamples reads items of the samples table by key (at most 100),
// asking again for those DynamoDB leaves unprocessed; missing ones are
// left out.
func (s *Store) getSamples(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	if len(keys) == 0 {
		return out, nil
	}
	pending := map[string]types.KeysAndAttributes{s.t.Samples: {Keys: keys}}
	for attempt := 0; len(pending[s.t.Samples].Keys) > 0; attempt++ {
		if attempt == 8 {
			return nil, errors.New("batch get: keys still unprocessed after 8 attempts")
		}
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(25<<attempt) * time.Millisecond):
			}
		}
		res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
		if err != nil {
			return nil, fmt.Errorf("batch get: %w", err)
		}
		out = append(out, res.Responses[s.t.Samples]...)
		pending = res.UnprocessedKeys
	}
	return out, nil
}

// Draft reads a flow's draft (consistent).
func (s *Store) Draft(ctx context.Context, project, flowID string) (automation.Draft, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Samples, Key: draftKey(flowID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return automation.Draft{}, fmt.Errorf("dynamostore: get draft of flow %s: %w", flowID, err)
	}
	r := reader{item: out.Item}
	if len(out.Item) == 0 || r.str(attrProject) != project {
		return automation.Draft{}, automation.NotFound("draft", flowID)
	}
	d := automation.Draft{FlowID: flowID, Project: project, BasedOn: r.int(attrBasedOn), Updated: r.time("updated")}
	if av, ok := out.Item[attrDefinition]; ok && r.err == nil {
		r.err = defDecoder.Decode(av, &d.Definition)
	}
	if r.err != nil {
		return automation.Draft{}, fmt.Errorf("dynamostore: decode draft of flow %s: %w", flowID, r.err)
	}
	return d, nil
}

// deleteVersions removes a deleted flow's versions, in batches, and its
// draft: the flow item is gone already, so nothing reads them any more.
func (s *Store) deleteVersions(ctx context.Context, f automation.Flow) error {
	keys := []map[string]types.AttributeValue{draftKey(f.ID)}
	for n := int64(1); n <= max(f.LiveVersion, 1); n++ {
		keys = append(keys, versionKey(f.ID, n))
	}
	for chunk := range slices.Chunk(keys, 25) {
		reqs := make([]types.WriteRequest, 0, len(chunk))
		for _, k := range chunk {
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
		}
		pending := map[string][]types.WriteRequest{s.t.Samples: reqs}
		for attempt := 0; len(pending[s.t.Samples]) > 0; attempt++ {
			if attempt == 8 {
				return errors.New("batch delete: items still unprocessed after 8 attempts")
			}
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(25<<attempt) * time.Millisecond):
				}
			}
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return fmt.Errorf("batch delete: %w", err)
			}
			pending = out.UnprocessedItems
		}
	}
	return nil
}

// bool returns a BOOL attribute; a missing one is false.
func (r *reader) bool(name string) bool {
	switch v := r.item[name].(type) {
	case nil:
		return false
	case *types.AttributeValueMemberBOOL:
		return v.Value
	default:
		r.fail(name, "a boolean")
		return false
	}
}

// attrDraftPayload references the draft definition of a test run of a
// flow's draft (automation.Run.DraftDefinition) stored with Payloads: a
// definition may take most of an item, so a run item beside its trigger
// and steps could not hold a large one. It is written once, with the run,
// under the run's payload prefix, and read with the run.
const attrDraftPayload = "draftPayload"

// draftInline is the largest draft definition, encoded, a run item holds
// itself when the store has Payloads.
const draftInline = 16 << 10

// storeDraft stores r's draft definition as a payload when it is larger
// than draftInline, and returns r without it and the payload's key ("" when
// the item holds it).
func (s *Store) storeDraft(ctx context.Context, r automation.Run) (automation.Run, string, error) {
	if s.payloads == nil || r.DraftDefinition == nil {
		return r, "", nil
	}
	data, err := json.Marshal(r.DraftDefinition)
	if err != nil {
		return r, "", fmt.Errorf("encode draft definition: %w", err)
	}
	if len(data) <= draftInline {
		return r, "", nil
	}
	key := payloadKey(r.ID, "draft", data)
	if err := s.payloads.Put(ctx, key, data); err != nil {
		return r, "", fmt.Errorf("store draft definition: %w", err)
	}
	r.DraftDefinition = nil
	return r, key, nil
}

// loadDraft puts back the draft definition an item references.
func (s *Store) loadDraft(ctx context.Context, item map[string]types.AttributeValue, r *automation.Run) error {
	rd := reader{item: item}
	key := rd.str(attrDraftPayload)
	if rd.err != nil || key == "" {
		return rd.err
	}
	if s.payloads == nil {
		return fmt.Errorf("run %s has its draft definition stored outside DynamoDB, and the store has none configured (WithPayloads)", r.ID)
	}
	r.DraftDefinition = &automation.Definition{}
	return s.getPayload(ctx, key, r.DraftDefinition)
}
