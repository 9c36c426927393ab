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
// Versions are numbered 1 to the flow's live version. A publish past the
// plan's bound prunes the oldest (automation.VersionWrites) and records on
// the flow item what is left: every version from versionsFrom to the live
// one, and those below it kept for RUNNING runs (versionsHeld), so a page
// of them, newest first, is still one BatchGetItem of known keys. Each
// version item records its size (attrBytes), and the flow item the sum
// over its kept versions (versionBytes), which the project's storedBytes
// adds (usage.go): a publish adds its version's size, a prune takes the
// pruned ones' away, in the flow's own transaction. Versions written
// before sizes were recorded count 0, both ways.
const (
	attrLiveVersion  = "liveVersion"  // flows: the live version number
	attrHasDraft     = "hasDraft"     // flows: BOOL
	attrVersionsFrom = "versionsFrom" // flows: N, the oldest version not pruned (none: 1)
	attrVersionsHeld = "versionsHeld" // flows: NS, versions below versionsFrom kept for RUNNING runs
	attrVersionBytes = "versionBytes" // flows: N, the bytes of the kept versions
	attrBytes        = "bytes"        // versions: N, the item's size
	attrDefinition   = "definition"   // versions and drafts
	attrBasedOn      = "basedOn"
)

// maxPinScan bounds the RUNNING runs of a flow a publish reads to find
// the versions they are pinned to; a flow with more prunes nothing on that
// publish (keeping a version too long is safe, pruning a pinned one is not).
const maxPinScan = 1000

var _ automation.VersionStore = (*Store)(nil)

func versionKey(flowID string, n int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrFlowID: str("version#" + flowID + "#" + strconv.FormatInt(n, 10))}
}

func draftKey(flowID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrFlowID: str("draft#" + flowID)}
}

// versionWrites are the transaction items of what a flow write carries
// beside the flow (automation.VersionWrites), and the bytes the published
// versions take; a version number taken already fails its condition.
func (s *Store) versionWrites(f automation.Flow) ([]types.TransactWriteItem, int64, error) {
	var (
		tx    []types.TransactWriteItem
		bytes int64
	)
	for _, v := range f.Publish {
		def, err := defEncoder.Encode(v.Definition)
		if err != nil {
			return nil, 0, fmt.Errorf("encode version %d: %w", v.Version, err)
		}
		item := versionKey(f.ID, v.Version)
		item[attrProject] = str(f.Project)
		item[attrVersion] = num(v.Version)
		item["created"] = timeValue(v.Created)
		item["message"] = str(v.Message)
		item["createdBy"] = str(v.CreatedBy)
		item[attrDefinition] = def
		size := int64(ItemSize(item))
		item[attrBytes] = num(size)
		bytes += size
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
			return nil, 0, fmt.Errorf("encode draft: %w", err)
		}
		item := draftKey(f.ID)
		item[attrProject] = str(f.Project)
		item[attrBasedOn] = num(d.BasedOn)
		item["updated"] = timeValue(d.Updated)
		item[attrDefinition] = def
		if size := ItemSize(item) + flowItemReserve; size > MaxItemSize {
			return nil, 0, automation.InvalidCode("FLOW_TOO_LARGE",
				"the draft of flow %q takes %d bytes stored, over the %d a flow may take: move large constants out of its steps", f.Name, size, MaxItemSize)
		}
		tx = append(tx, types.TransactWriteItem{Put: &types.Put{TableName: &s.t.Samples, Item: item}})
	}
	return tx, bytes, nil
}

// keptVersions are the versions a flow item says are kept: from
// versionsFrom up, and those held below it.
type keptVersions struct {
	from int64
	held []int64 // ascending
}

func readKept(item map[string]types.AttributeValue) (keptVersions, error) {
	k := keptVersions{from: 1}
	r := reader{item: item}
	if item[attrVersionsFrom] != nil {
		k.from = r.int(attrVersionsFrom)
	}
	if ns, ok := item[attrVersionsHeld].(*types.AttributeValueMemberNS); ok {
		for _, v := range ns.Value {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return k, fmt.Errorf("attribute %s: %w", attrVersionsHeld, err)
			}
			k.held = append(k.held, n)
		}
		slices.Sort(k.held)
	}
	return k, r.err
}

// prune is what a publish removes past the flow's bound: the deletes of
// the version items, the flow's new keptVersions, and the bytes freed.
type prune struct {
	deletes []types.TransactWriteItem
	kept    keptVersions
	freed   int64
}

// planPrune works out which versions a publish of f prunes
// (automation.VersionWrites): those below the newest f.KeepVersions, held
// ones first, at most automation.MaxPrunedPerWrite, minus those a RUNNING
// run is pinned to, which are held. Nil when there is nothing to prune.
func (s *Store) planPrune(ctx context.Context, f automation.Flow, stored map[string]types.AttributeValue) (*prune, error) {
	if len(f.Publish) == 0 || f.KeepVersions <= 0 {
		return nil, nil
	}
	kept, err := readKept(stored)
	if err != nil {
		return nil, err
	}
	target := f.LiveVersion - f.KeepVersions + 1 // the oldest version the bound keeps
	if target <= kept.from && len(kept.held) == 0 {
		return nil, nil
	}
	candidates := slices.Clone(kept.held[:min(len(kept.held), automation.MaxPrunedPerWrite)])
	rest := kept.held[len(candidates):]
	from := kept.from
	for ; from < target && len(candidates) < automation.MaxPrunedPerWrite; from++ {
		candidates = append(candidates, from)
	}
	pinned, ok, err := s.runningVersions(ctx, f.Project, f.ID)
	if err != nil || !ok {
		return nil, err
	}
	keys := make([]map[string]types.AttributeValue, len(candidates))
	for i, n := range candidates {
		keys[i] = versionKey(f.ID, n)
	}
	items, err := s.getSamples(ctx, keys, attrFlowID, attrVersion, attrBytes)
	if err != nil {
		return nil, fmt.Errorf("read versions to prune: %w", err)
	}
	sizes := map[int64]int64{}
	for _, it := range items {
		r := reader{item: it}
		n, b := r.int(attrVersion), r.int(attrBytes)
		if r.err != nil {
			return nil, fmt.Errorf("read versions to prune: %w", r.err)
		}
		sizes[n] = b
	}
	p := &prune{kept: keptVersions{from: from, held: slices.Clone(rest)}}
	for _, n := range candidates {
		size, exists := sizes[n]
		switch {
		case !exists: // pruned already (or never written: a gap before versions)
		case pinned[n]:
			p.kept.held = append(p.kept.held, n)
		default:
			p.deletes = append(p.deletes, types.TransactWriteItem{Delete: &types.Delete{TableName: &s.t.Samples, Key: versionKey(f.ID, n)}})
			p.freed += size
		}
	}
	slices.Sort(p.kept.held)
	return p, nil
}

// runningVersions are the versions the flow's RUNNING runs are pinned to,
// read through the byStatus index and the runs' flowVersion; ok is false
// when the flow has more than maxPinScan of them.
func (s *Store) runningVersions(ctx context.Context, project, flowID string) (map[int64]bool, bool, error) {
	pinned := map[int64]bool{}
	if s.t.Runs == "" {
		return pinned, true, nil
	}
	in := &dynamodb.QueryInput{
		TableName: &s.t.Runs, IndexName: aws.String(indexByStatus),
		KeyConditionExpression:    aws.String("#h = :h"),
		ExpressionAttributeNames:  map[string]string{"#h": attrProjectFlowStatus},
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": str(project + "#" + flowID + "#" + string(automation.RunRunning))},
	}
	items, more, err := s.queryPage(ctx, in, maxPinScan)
	if err != nil {
		return nil, false, fmt.Errorf("read running runs: %w", err)
	}
	if more {
		return nil, false, nil
	}
	for chunk := range slices.Chunk(items, batchGetSize) {
		keys := make([]map[string]types.AttributeValue, len(chunk))
		for i, it := range chunk {
			keys[i] = map[string]types.AttributeValue{attrID: it[attrID]}
		}
		got, err := s.batchGetProjected(ctx, s.t.Runs, keys, "flowVersion")
		if err != nil {
			return nil, false, fmt.Errorf("read running runs: %w", err)
		}
		for _, run := range got {
			if run["flowVersion"] == nil {
				continue
			}
			if _, isNull := run["flowVersion"].(*types.AttributeValueMemberNULL); isNull {
				continue
			}
			r := reader{item: run}
			n := r.int("flowVersion")
			if r.err != nil {
				return nil, false, fmt.Errorf("read running runs: %w", r.err)
			}
			pinned[n] = true
		}
	}
	return pinned, true, nil
}

// pruneUpdate adds to a flow item's update (names and values from
// setExpression) what a publish changes of its kept versions: versionsFrom
// and versionsHeld after p (nil: nothing pruned), and the ADD of added
// minus the freed bytes to versionBytes.
func pruneUpdate(expr string, names map[string]string, values map[string]types.AttributeValue, p *prune, added int64) string {
	delta := added
	if p != nil {
		delta -= p.freed
		names["#vfrom"], values[":vfrom"] = attrVersionsFrom, num(p.kept.from)
		expr += ", #vfrom = :vfrom"
		names["#vheld"] = attrVersionsHeld
		if len(p.kept.held) > 0 {
			held := make([]string, len(p.kept.held))
			for i, n := range p.kept.held {
				held[i] = strconv.FormatInt(n, 10)
			}
			values[":vheld"] = &types.AttributeValueMemberNS{Value: held}
			expr += ", #vheld = :vheld"
		} else {
			expr += " REMOVE #vheld"
		}
	}
	if delta != 0 {
		names["#vbytes"], values[":vbytes"] = attrVersionBytes, num(delta)
		expr += " ADD #vbytes :vbytes"
	}
	return expr
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
// item says which are kept (keptVersions), and the page is the kept
// numbers below the position (the last number returned), read in one
// BatchGetItem.
func (s *Store) FlowVersions(ctx context.Context, project, flowID string, q automation.ListQuery) (automation.Page[automation.FlowVersion], error) {
	var page automation.Page[automation.FlowVersion]
	item, err := s.getFlow(ctx, flowID)
	if err != nil {
		return page, fmt.Errorf("dynamostore: list versions of flow %s: %w", flowID, err)
	}
	if len(item) == 0 || (&reader{item: item}).str(attrProject) != project {
		return page, nil
	}
	r := reader{item: item}
	top := max(r.int(attrLiveVersion), 1)
	kept, err := readKept(item)
	if err == nil {
		err = r.err
	}
	if err != nil {
		return page, fmt.Errorf("dynamostore: list versions of flow %s: %w", flowID, err)
	}
	if q.After != "" {
		n, err := strconv.ParseInt(q.After, 10, 64)
		if err != nil || n < 1 {
			return page, automation.InvalidCode("INVALID_CURSOR", "list position %q is not valid", q.After)
		}
		top = min(top, n-1)
	}
	limit := max(q.Limit, 1)
	var numbers []int64 // kept, below the position, newest first, one more than the page
	for n := top; n >= kept.from && n >= 1 && len(numbers) <= limit; n-- {
		numbers = append(numbers, n)
	}
	for i := len(kept.held) - 1; i >= 0 && len(numbers) <= limit; i-- {
		if n := kept.held[i]; n <= top && n < kept.from {
			numbers = append(numbers, n)
		}
	}
	if len(numbers) > limit {
		numbers = numbers[:limit]
		page.Next = strconv.FormatInt(numbers[limit-1], 10)
	}
	keys := make([]map[string]types.AttributeValue, len(numbers))
	for i, n := range numbers {
		keys[i] = versionKey(flowID, n)
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
	return page, nil
}

// getSamples reads items of the samples table by key (at most 100), only
// the attributes named when some are; see batchGetProjected.
func (s *Store) getSamples(ctx context.Context, keys []map[string]types.AttributeValue, attrs ...string) ([]map[string]types.AttributeValue, error) {
	return s.batchGetProjected(ctx, s.t.Samples, keys, attrs...)
}

// batchGetProjected reads items of a table by key (at most 100), only the
// attributes named when some are, asking again for those DynamoDB leaves
// unprocessed; missing ones are left out.
func (s *Store) batchGetProjected(ctx context.Context, table string, keys []map[string]types.AttributeValue, attrs ...string) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	if len(keys) == 0 {
		return out, nil
	}
	ka := types.KeysAndAttributes{Keys: keys}
	if len(attrs) > 0 {
		ka.ExpressionAttributeNames = map[string]string{}
		proj := ""
		for i, a := range attrs {
			n := "#p" + strconv.Itoa(i)
			ka.ExpressionAttributeNames[n] = a
			if i > 0 {
				proj += ", "
			}
			proj += n
		}
		ka.ProjectionExpression = &proj
	}
	pending := map[string]types.KeysAndAttributes{table: ka}
	for attempt := 0; len(pending[table].Keys) > 0; attempt++ {
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
		out = append(out, res.Responses[table]...)
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
