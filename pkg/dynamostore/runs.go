package dynamostore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// Attributes of the runs table beside the run record's own (id, flowId,
// status, created, ...).
const (
	attrProjectFlow       = "projectFlow"       // project#flowId: the byFlow index's partition
	attrProjectFlowStatus = "projectFlowStatus" // project#flowId#status: the byStatus index's partition
	attrLeaseUntil        = "leaseUntil"        // N, Unix nanoseconds: a claim holds the run until then
	attrLeaseToken        = "leaseToken"        // S: the claim that holds the run; run writes are conditional on it
	attrEnded             = "ended"             // N: attempts released or finished (attempts - ended = interrupted)
	indexByFlow           = "byFlow"
)

// The project-wide status search's index: every run of a project with one
// status in one partition, newest first, so that a page of
// GET /api/v1/runs?status= is one query whatever the project holds.
const (
	attrProjectRunStatus = "projectRunStatus" // project#status: the byProjectStatus index's partition
	indexByProjectStatus = "byProjectStatus"
)

// DefaultRunRetention is how long run records live before TTL removes them,
// unless WithRunRetention says otherwise.
const DefaultRunRetention = 30 * 24 * time.Hour

// Option configures a Store.
type Option func(*Store)

// WithRunRetention sets how long after its creation a run expires: its
// expiresAt, which the table's TTL acts on. It should match the Service's
// RunPolicy.Retention.
func WithRunRetention(d time.Duration) Option {
	return func(s *Store) { s.retention = d }
}

var _ automation.RunStore = (*Store)(nil)

func runKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrID: str(id)}
}

// runRecord encodes the fields of a run that change as it executes: the
// whole record through the domain's json tags, minus its key.
func runRecord(r automation.Run) (map[string]types.AttributeValue, error) {
	av, err := defEncoder.Encode(r)
	if err != nil {
		return nil, fmt.Errorf("encode run: %w", err)
	}
	m, ok := av.(*types.AttributeValueMemberM)
	if !ok {
		return nil, fmt.Errorf("encode run: got %T, want a map", av)
	}
	delete(m.Value, attrID)
	m.Value[attrProjectFlowStatus] = str(r.Project + "#" + r.FlowID + "#" + string(r.Status))
	m.Value[attrProjectRunStatus] = str(r.Project + "#" + string(r.Status))
	return m.Value, nil
}

func decodeRun(item map[string]types.AttributeValue) (automation.Run, error) {
	var r automation.Run
	if err := defDecoder.Decode(&types.AttributeValueMemberM{Value: item}, &r); err != nil {
		return automation.Run{}, fmt.Errorf("dynamostore: decode run: %w", err)
	}
	rd := reader{item: item}
	r.Project = rd.str(attrProject)
	if rd.err != nil {
		return automation.Run{}, fmt.Errorf("dynamostore: decode run %s: %w", r.ID, rd.err)
	}
	return r, nil
}

// CreateRun writes a new RUNNING run: the store half of the AWS run queue,
// which sends the SQS message once this returns. The flow is read first,
// so that a run of a missing flow (or of another project's) is refused,
// but it is not part of the write: a condition check on the flow item in
// the run's transaction would make every run of a busy flow contend on one
// item, which DynamoDB refuses for concurrent transactions. A run created
// while its flow is being deleted is finished FAILED when executed ("flow
// deleted") and expires with its retention.
//
// With WithPayloads, a trigger body too large for the item is stored first,
// under a key of its own content: a duplicate ID (RUN_EXISTS) leaves an
// unreferenced object under the run's prefix, never a changed one.
func (s *Store) CreateRun(ctx context.Context, r automation.Run) error {
	flow, err := s.getFlow(ctx, r.FlowID)
	if err != nil {
		return fmt.Errorf("dynamostore: create run %s: read flow: %w", r.ID, err)
	}
	if rd := (reader{item: flow}); len(flow) == 0 || rd.str(attrProject) != r.Project {
		return automation.NotFound("flow", r.FlowID)
	}
	r, ref, err := s.storeTrigger(ctx, r)
	if err != nil {
		return fmt.Errorf("dynamostore: create run %s: %w", r.ID, err)
	}
	r, dref, err := s.storeDraft(ctx, r) // versions.go
	if err != nil {
		return fmt.Errorf("dynamostore: create run %s: %w", r.ID, err)
	}
	item, err := runRecord(r)
	if err != nil {
		return fmt.Errorf("dynamostore: create run %s: %w", r.ID, err)
	}
	if ref != "" {
		item[attrTriggerPayload] = str(ref)
	}
	if dref != "" {
		item[attrDraftPayload] = str(dref)
	}
	item[attrID] = str(r.ID)
	item[attrProject] = str(r.Project)
	item[attrProjectFlow] = str(r.Project + "#" + r.FlowID)
	item[attrCreatedSort] = str(createdSort(r.Created, r.ID))
	item[attrExpiresAt] = num(r.Created.Add(s.retention).Unix())
	// A retry or replay records its audit entry with the run.
	failed, err := s.writeOne(ctx, types.TransactWriteItem{Put: &types.Put{
		TableName: &s.t.Runs, Item: item, ConditionExpression: aws.String("attribute_not_exists(id)"),
	}})
	if failed {
		return automation.RunExists(r.ID)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: create run %s: %w", r.ID, err)
	}
	return nil
}

// getRun reads a run of a project, strongly consistent.
func (s *Store) getRun(ctx context.Context, project, id string) (automation.Run, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Runs, Key: runKey(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return automation.Run{}, fmt.Errorf("dynamostore: get run %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return automation.Run{}, automation.NotFound("run", id)
	}
	r, err := decodeRun(out.Item)
	if err != nil {
		return automation.Run{}, err
	}
	if r.Project != project {
		return automation.Run{}, automation.NotFound("run", id)
	}
	if err := s.loadPayloads(ctx, out.Item, &r); err != nil {
		return automation.Run{}, fmt.Errorf("dynamostore: get run %s: %w", id, err)
	}
	if err := s.foldJournal(ctx, out.Item, &r); err != nil {
		return automation.Run{}, fmt.Errorf("dynamostore: get run %s: %w", id, err)
	}
	return r, nil
}

// Run reads a run of a project's flow.
func (s *Store) Run(ctx context.Context, project, flowID, id string) (automation.Run, error) {
	r, err := s.getRun(ctx, project, id)
	if err != nil {
		return automation.Run{}, err
	}
	if r.FlowID != flowID {
		return automation.Run{}, automation.NotFound("run", id)
	}
	return r, nil
}

var _ automation.RunStatusReader = (*Store)(nil)

// RunStatus reads a run's status alone, for an ON_COMPLETION wait that
// looks every 100 ms (automation.RunStatusReader): a projection of status,
// project and flowId, eventually consistent. DynamoDB charges a read by the
// whole item whatever it returns, so an eventually consistent read is what
// halves the read units (0.5 per 4 KB instead of 1); the projection spares
// the transfer and decoding of the steps, and a large run's payload
// objects (two S3 GETs per look with Run). The waiter reads the whole run,
// strongly consistent, once this says it is final; a lagging answer only
// means one more look.
func (s *Store) RunStatus(ctx context.Context, project, flowID, id string) (automation.RunStatus, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Runs, Key: runKey(id),
		ProjectionExpression:     aws.String("#status, #project, #flow"),
		ExpressionAttributeNames: map[string]string{"#status": "status", "#project": attrProject, "#flow": attrFlowID},
	})
	if err != nil {
		return "", fmt.Errorf("dynamostore: get status of run %s: %w", id, err)
	}
	rd := reader{item: out.Item}
	status, p, f := rd.str("status"), rd.str(attrProject), rd.str(attrFlowID)
	if rd.err != nil {
		return "", fmt.Errorf("dynamostore: get status of run %s: %w", id, rd.err)
	}
	if len(out.Item) == 0 || p != project || f != flowID {
		return "", automation.NotFound("run", id)
	}
	return automation.RunStatus(status), nil
}

var _ automation.RunDueReader = (*Store)(nil)

// RunDue reads a run's status and nextAttemptAt alone, for the early
// delivery of a parked run's message (automation.RunDueReader): one
// GetItem, eventually consistent, projected. As with RunStatus, DynamoDB
// charges by the whole item, so eventual consistency is what halves the
// cost (0.5 read units per 4 KB of the run item); the projection spares
// the transfer of the steps.
func (s *Store) RunDue(ctx context.Context, project, id string) (automation.RunStatus, *time.Time, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Runs, Key: runKey(id),
		ProjectionExpression:     aws.String("#status, #project, #next"),
		ExpressionAttributeNames: map[string]string{"#status": "status", "#project": attrProject, "#next": "nextAttemptAt"},
	})
	if err != nil {
		return "", nil, fmt.Errorf("dynamostore: get due time of run %s: %w", id, err)
	}
	rd := reader{item: out.Item}
	status, p, next := rd.str("status"), rd.str(attrProject), rd.timePtr("nextAttemptAt")
	if rd.err != nil {
		return "", nil, fmt.Errorf("dynamostore: get due time of run %s: %w", id, rd.err)
	}
	if len(out.Item) == 0 || p != project {
		return "", nil, automation.NotFound("run", id)
	}
	return automation.RunStatus(status), next, nil
}

// ListRuns pages through a flow's run summaries newest first, ending a page
// early at automation.RunPageBudget bytes. The index partitions carry the
// project, so another project's request reads an empty partition. Values
// stored with Payloads are not loaded (summaries drop them anyway).
func (s *Store) ListRuns(ctx context.Context, project, flowID string, q automation.ListQuery) (automation.Page[automation.Run], error) {
	index, hashAttr, hashValue := indexByFlow, attrProjectFlow, project+"#"+flowID
	if q.Status != "" {
		index, hashAttr, hashValue = indexByStatus, attrProjectFlowStatus, project+"#"+flowID+"#"+q.Status
	}
	entries, next, err := s.listPage(ctx, s.t.Runs, index, hashAttr, hashValue, q, false)
	if err != nil {
		return automation.Page[automation.Run]{}, fmt.Errorf("dynamostore: list runs of %s: %w", flowID, err)
	}
	page, err := s.summaries(ctx, entries, next, project, q.Status)
	if err != nil {
		return automation.Page[automation.Run]{}, fmt.Errorf("dynamostore: list runs of %s: %w", flowID, err)
	}
	return page, nil
}

// ListRunsJSON is ListRuns with each summary encoded: the items hold
// Go values decoded from their attributes, so there is no stored JSON to
// return instead.
func (s *Store) ListRunsJSON(ctx context.Context, project, flowID string, q automation.ListQuery) (automation.Page[json.RawMessage], error) {
	return automation.SummaryPageJSON(s.ListRuns(ctx, project, flowID, q))
}

// SearchRunsJSON is SearchRuns with each summary encoded, as ListRunsJSON.
func (s *Store) SearchRunsJSON(ctx context.Context, project string, q automation.RunQuery) (automation.Page[json.RawMessage], error) {
	return automation.SummaryPageJSON(s.SearchRuns(ctx, project, q))
}

// SearchRuns pages through a project's run summaries newest first: one
// query of the index that fits the filters (by flow, by flow and status, by
// project and status, or by project), the creation window a condition on
// its sort key. No filter expression: a page is one query at any size.
func (s *Store) SearchRuns(ctx context.Context, project string, q automation.RunQuery) (automation.Page[automation.Run], error) {
	index, hashAttr, hashValue := indexByProject, attrProject, project
	switch {
	case q.FlowID != "" && q.Status != "":
		index, hashAttr, hashValue = indexByStatus, attrProjectFlowStatus, project+"#"+q.FlowID+"#"+q.Status
	case q.FlowID != "":
		index, hashAttr, hashValue = indexByFlow, attrProjectFlow, project+"#"+q.FlowID
	case q.Status != "":
		index, hashAttr, hashValue = indexByProjectStatus, attrProjectRunStatus, project+"#"+q.Status
	}
	in := &dynamodb.QueryInput{
		TableName: &s.t.Runs, IndexName: &index, ScanIndexForward: aws.Bool(false),
		KeyConditionExpression:    aws.String("#h = :h"),
		ExpressionAttributeNames:  map[string]string{"#h": hashAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": str(hashValue)},
	}
	// createdSort is the time at a fixed width, then "#" and the ID: a run
	// created at until sorts after until's own string.
	since, until := q.Since.UTC().Format(sortTimeLayout), q.Until.UTC().Format(sortTimeLayout)
	switch {
	case !q.Since.IsZero() && !q.Until.IsZero():
		*in.KeyConditionExpression += " AND #c BETWEEN :since AND :until"
	case !q.Since.IsZero():
		*in.KeyConditionExpression += " AND #c >= :since"
	case !q.Until.IsZero():
		*in.KeyConditionExpression += " AND #c < :until"
	}
	if !q.Since.IsZero() || !q.Until.IsZero() {
		in.ExpressionAttributeNames["#c"] = attrCreatedSort
	}
	if !q.Since.IsZero() {
		in.ExpressionAttributeValues[":since"] = str(since)
	}
	if !q.Until.IsZero() {
		in.ExpressionAttributeValues[":until"] = str(until)
	}
	if q.After != "" {
		id, err := positionID(q.After)
		if err != nil {
			return automation.Page[automation.Run]{}, err
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			attrID: str(id), hashAttr: str(hashValue), attrCreatedSort: str(q.After),
		}
	}
	entries, more, err := s.queryPage(ctx, in, q.Limit)
	if err != nil {
		return automation.Page[automation.Run]{}, fmt.Errorf("dynamostore: search runs: %w", err)
	}
	next := ""
	if more {
		rd := reader{item: entries[len(entries)-1]}
		if next = rd.str(attrCreatedSort); rd.err != nil || next == "" {
			return automation.Page[automation.Run]{}, fmt.Errorf("dynamostore: search runs: item without %s", attrCreatedSort)
		}
	}
	page, err := s.summaries(ctx, entries, next, project, q.Status)
	if err != nil {
		return automation.Page[automation.Run]{}, fmt.Errorf("dynamostore: search runs: %w", err)
	}
	return page, nil
}

// summaryChunk is how many runs summaries reads per BatchGetItem: a page
// ends at automation.RunPageBudget bytes of summaries, and runs can be
// large, so a page of 100 big runs is not read whole only to stop after a
// few.
const summaryChunk = 25

// summaries reads the runs of a page of index entries (the run indexes
// hold keys: tables.go) and decodes them as summaries, ending the page
// early at automation.RunPageBudget bytes. A run whose status moved since
// the index entry was written (the index lags the table) is left out of a
// list filtered by status: it belongs to the other list.
func (s *Store) summaries(ctx context.Context, entries []map[string]types.AttributeValue, next, project, status string) (automation.Page[automation.Run], error) {
	page := automation.Page[automation.Run]{Items: make([]automation.Run, 0, len(entries)), Next: next}
	bytes := 0
	for start := 0; start < len(entries); start += summaryChunk {
		chunk := entries[start:min(start+summaryChunk, len(entries))]
		if start > 0 && bytes >= automation.RunPageBudget {
			// The page is full by size: end it after the previous entry.
			rd := reader{item: entries[start-1]}
			if page.Next = rd.str(attrCreatedSort); rd.err != nil || page.Next == "" {
				return automation.Page[automation.Run]{}, fmt.Errorf("entry without %s", attrCreatedSort)
			}
			break
		}
		items, err := s.batchGet(ctx, s.t.Runs, chunk)
		if err != nil {
			return automation.Page[automation.Run]{}, err
		}
		byID := make(map[string]map[string]types.AttributeValue, len(items))
		for _, it := range items {
			rd := reader{item: it}
			byID[rd.str(attrID)] = it
		}
		for i, e := range chunk {
			if i > 0 && bytes >= automation.RunPageBudget {
				rd := reader{item: chunk[i-1]}
				if page.Next = rd.str(attrCreatedSort); rd.err != nil || page.Next == "" {
					return automation.Page[automation.Run]{}, fmt.Errorf("entry without %s", attrCreatedSort)
				}
				return page, nil
			}
			rd := reader{item: e}
			it, ok := byID[rd.str(attrID)]
			if !ok {
				continue // deleted since the query
			}
			r, err := decodeRun(it)
			if err != nil {
				return automation.Page[automation.Run]{}, err
			}
			if r.Project != project || status != "" && string(r.Status) != status {
				continue
			}
			r = r.Summary()
			page.Items = append(page.Items, r)
			bytes += automation.SummaryBytes(r)
		}
	}
	return page, nil
}

// ClaimRun takes a run with one conditional update: RUNNING, of the
// project, and no live lease. Of many simultaneous claims exactly one
// passes the condition.
func (s *Store) ClaimRun(ctx context.Context, project, id string, now time.Time, lease time.Duration) (automation.Run, error) {
	token := automation.NewID("lease_")
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Runs, Key: runKey(id),
		UpdateExpression: aws.String("SET #attempts = if_not_exists(#attempts, :zero) + :one, #lease = :until, #token = :token"),
		ConditionExpression: aws.String("#project = :project AND #status = :running AND " +
			"(attribute_not_exists(#lease) OR #lease <= :now)"),
		ExpressionAttributeNames: map[string]string{
			"#attempts": "attempts", "#lease": attrLeaseUntil, "#project": attrProject, "#status": "status",
			"#token": attrLeaseToken,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":zero": num(0), ":one": num(1), ":project": str(project), ":running": str(string(automation.RunRunning)),
			":until": num(now.Add(lease).UnixNano()), ":now": num(now.UnixNano()), ":token": str(token),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if old, ok := conditionFailed(err); ok {
		if len(old) == 0 {
			// Not every emulator returns the item: read it.
			out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Runs, Key: runKey(id), ConsistentRead: aws.Bool(true)})
			if err != nil {
				return automation.Run{}, fmt.Errorf("dynamostore: claim run %s: %w", id, err)
			}
			old = out.Item
		}
		r := reader{item: old}
		switch status := automation.RunStatus(r.str("status")); {
		case len(old) == 0 || r.str(attrProject) != project:
			return automation.Run{}, automation.NotFound("run", id)
		case status.Final():
			return automation.Run{}, automation.RunFinished(id, status)
		default:
			return automation.Run{}, automation.RunClaimed(id)
		}
	}
	if err != nil {
		return automation.Run{}, fmt.Errorf("dynamostore: claim run %s: %w", id, err)
	}
	r, err := decodeRun(out.Attributes)
	if err != nil {
		return automation.Run{}, err
	}
	if err := s.loadPayloads(ctx, out.Attributes, &r); err != nil {
		return automation.Run{}, fmt.Errorf("dynamostore: claim run %s: %w", id, err)
	}
	if err := s.foldJournal(ctx, out.Attributes, &r); err != nil {
		return automation.Run{}, fmt.Errorf("dynamostore: claim run %s: %w", id, err)
	}
	rd := reader{item: out.Attributes}
	r.Interrupted, r.LeaseToken = r.Attempts-1-int(rd.int(attrEnded)), token
	if rd.err != nil {
		return automation.Run{}, fmt.Errorf("dynamostore: claim run %s: %w", id, rd.err)
	}
	return r, nil
}

// ReleaseRun records a failed attempt and drops its lease, if the attempt
// still holds the run (see automation.RunStore).
func (s *Store) ReleaseRun(ctx context.Context, r automation.Run) error {
	r.Status = automation.RunRunning
	err := s.updateRun(ctx, r)
	if _, ok := conditionFailed(err); ok {
		return s.whyRefused(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: release run %s: %w", r.ID, err)
	}
	return nil
}

// whyRefused reads a run whose fenced write failed its condition and
// returns the reason: gone, final, or held by another claim.
func (s *Store) whyRefused(ctx context.Context, r automation.Run) error {
	stored, err := s.getRun(ctx, r.Project, r.ID)
	switch {
	case err != nil:
		return err // ErrNotFound for a run that is gone
	case stored.Status.Final():
		return automation.RunFinished(r.ID, stored.Status)
	}
	return automation.RunLeaseLost(r.ID)
}

// RecordSteps journals the steps of a claimed attempt, keeping its claim.
func (s *Store) RecordSteps(ctx context.Context, r automation.Run) error {
	r.Status = automation.RunRunning
	err := s.writeRun(ctx, r, false)
	if _, ok := conditionFailed(err); ok {
		return s.whyRefused(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: record steps of run %s: %w", r.ID, err)
	}
	return nil
}

// updateRun writes r's record over a RUNNING run of its project and ends
// the attempt (drops the lease).
func (s *Store) updateRun(ctx context.Context, r automation.Run) error {
	return s.writeRun(ctx, r, true)
}

// writeRun writes r's record over a RUNNING run that r's attempt holds,
// ending the attempt or not.
func (s *Store) writeRun(ctx context.Context, r automation.Run, end bool) error {
	in, err := s.runUpdate(ctx, r, end)
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: in.TableName, Key: in.Key, UpdateExpression: in.UpdateExpression,
		ConditionExpression: in.ConditionExpression, ExpressionAttributeNames: in.ExpressionAttributeNames,
		ExpressionAttributeValues: in.ExpressionAttributeValues,
	})
	return err
}

// runUpdate is the write of a run's record, conditioned on the run being
// RUNNING in r's project and held by r's claim (LeaseToken); attempts,
// created, the trigger (written once, by CreateRun) and the keys stay as
// stored. With end, the attempt ends: the lease goes and the attempt counts
// as ended (a test run's draft definition, written once too). With WithPayloads, step outputs too large for the item are
// stored first and referenced (storeSteps); what the record lacks (no
// steps, onError steps none or in the payload, no response) is removed
// from the item.
func (s *Store) runUpdate(ctx context.Context, r automation.Run, end bool) (*types.Update, error) {
	r, ref, err := s.storeSteps(ctx, r)
	if err != nil {
		return nil, err
	}
	rec, err := runRecord(r)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"attempts", "created", "trigger", attrFlowID, "draftDefinition"} {
		delete(rec, k)
	}
	var remove []string
	if ref != "" {
		rec[attrStepsPayload] = str(ref)
	}
	set, names, values := setExpression(rec)
	if ref == "" {
		// Steps small again after a large attempt: the item holds them.
		remove = append(remove, "#stepsPayload")
		names["#stepsPayload"] = attrStepsPayload
	}
	for i, k := range []string{"steps", "onErrorSteps", "response"} {
		if _, ok := rec[k]; !ok {
			// Empty now, or in the steps payload: what an earlier write
			// left in the item goes.
			n := "#gone" + strconv.Itoa(i)
			remove = append(remove, n)
			names[n] = k
		}
	}
	// The whole run holds what its journal held: the count goes, and
	// the entries it counted are read no more.
	remove = append(remove, "#journalLen")
	names["#journalLen"] = attrJournalLen
	if r.OnErrorOf == "" {
		// Its onError steps are done (or never ran): the journal's
		// marker of them goes (omitted from rec, it would stay).
		remove = append(remove, "#onErrorOf")
		names["#onErrorOf"] = "onErrorOf"
	}
	if r.WaitingFor == "" {
		// Executing or final: why it last waited goes (omitted from rec,
		// it would stay).
		remove = append(remove, "#waitingFor")
		names["#waitingFor"] = "waitingFor"
	}
	names["#project"], names["#status"], names["#token"] = attrProject, "status", attrLeaseToken
	values[":project"], values[":running"] = str(r.Project), str(string(automation.RunRunning))
	values[":token"] = str(r.LeaseToken)
	if end {
		remove = append(remove, "#lease")
		names["#lease"], names["#ended"] = attrLeaseUntil, attrEnded
		values[":zero"], values[":one"] = num(0), num(1)
		set += ", #ended = if_not_exists(#ended, :zero) + :one"
	}
	if len(remove) > 0 {
		set += " REMOVE " + strings.Join(remove, ", ")
	}
	return &types.Update{
		TableName: &s.t.Runs, Key: runKey(r.ID),
		UpdateExpression:          aws.String(set),
		ConditionExpression:       aws.String("#project = :project AND #status = :running AND #token = :token"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}, nil
}

// FinishRun writes a run's final state (conditional on the attempt's
// claim), then adds it to the flow's stats with atomic ADDs in a separate
// write: the flow item is hot (every run of the flow finishes on it), and a
// transaction over it and the run would contend, which DynamoDB refuses for
// concurrent transactions on one item. The stats count a finished run at
// most once: a finish that is retried after the run was written finds it
// final (RUN_FINISHED) and adds nothing; a process that dies between the
// two writes loses that one count. The run's hour of the flow's insight
// counters is a third write, after the stats (insights.go).
func (s *Store) FinishRun(ctx context.Context, r automation.Run) error {
	if !r.Status.Final() {
		return fmt.Errorf("dynamostore: finish run %s: status %q is not final", r.ID, r.Status)
	}
	err := s.finishRun(ctx, r) // alerts.go: with the run's event when one is wanted
	if _, ok := conditionFailed(err); ok {
		return s.whyRefused(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: finish run %s: %w", r.ID, err)
	}
	if err := s.addStats(ctx, r); err != nil {
		// The run is final; its stats are bookkeeping: say so, and go on.
		s.log.WarnContext(ctx, "flow stats not updated for a finished run", "run", r.ID, "flow", r.FlowID, "err", err)
	}
	if err := s.addInsight(ctx, r); err != nil { // insights.go: best effort, as the stats
		s.log.WarnContext(ctx, "flow insights not updated for a finished run", "run", r.ID, "flow", r.FlowID, "err", err)
	}
	return nil
}

// addStats adds a finished run to its flow's stats: ADD finished and
// succeeded, and lastRun moved forward to the run's creation when it is
// newer, in one conditional update; when lastRun is newer already, the
// counts alone. A flow that is gone (or another project's) gets nothing.
func (s *Store) addStats(ctx context.Context, r automation.Run) error {
	succeeded := int64(0)
	if r.Status == automation.RunSucceeded {
		succeeded = 1
	}
	names := map[string]string{"#f": attrFinished, "#s": attrSucceeded, "#project": attrProject, "#id": attrID}
	values := map[string]types.AttributeValue{":one": num(1), ":s": num(succeeded), ":project": str(r.Project)}
	addBytes, removeGone := s.usageTerms(r, names, values) // usage.go
	owned := "attribute_exists(#id) AND #project = :project"
	withLast := &dynamodb.UpdateItemInput{
		TableName: &s.t.Flows, Key: flowKey(r.FlowID),
		UpdateExpression:          aws.String("ADD #f :one, #s :s" + addBytes + " SET #l = :created" + removeGone),
		ConditionExpression:       aws.String(owned + " AND (attribute_not_exists(#l) OR #l < :created)"),
		ExpressionAttributeNames:  maps.Clone(names),
		ExpressionAttributeValues: maps.Clone(values),
	}
	withLast.ExpressionAttributeNames["#l"] = attrLastRun
	// Fixed width, so that the condition compares strings as times (the
	// value reads back as RFC 3339 like any other).
	withLast.ExpressionAttributeValues[":created"] = str(r.Created.UTC().Format(sortTimeLayout))
	_, err := s.db.UpdateItem(ctx, withLast)
	if _, ok := conditionFailed(err); !ok {
		return err
	}
	// A newer run set lastRun already, or the flow is gone.
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Flows, Key: flowKey(r.FlowID),
		UpdateExpression: aws.String("ADD #f :one, #s :s" + addBytes + removeGone), ConditionExpression: aws.String(owned),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	})
	if _, ok := conditionFailed(err); ok {
		return nil // the flow is gone, and so are its stats
	}
	return err
}

// DeleteRunsBefore removes up to limit runs created before t, oldest first.
// On AWS the table's TTL does this work; this scan is for completeness and
// for operators, not for a schedule.
func (s *Store) DeleteRunsBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	items, err := s.scanAll(ctx, &dynamodb.ScanInput{
		TableName:                 &s.t.Runs,
		FilterExpression:          aws.String("#c < :t"),
		ProjectionExpression:      aws.String("#id, #c, #tp, #sp"),
		ExpressionAttributeNames:  map[string]string{"#c": attrCreatedSort, "#id": attrID, "#tp": attrTriggerPayload, "#sp": attrStepsPayload},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": str(t.UTC().Format(sortTimeLayout))},
	})
	if err != nil {
		return 0, fmt.Errorf("dynamostore: purge runs: %w", err)
	}
	slices.SortFunc(items, byCreatedSort)
	if len(items) > limit {
		items = items[:limit]
	}
	if err := s.deleteByID(ctx, s.t.Runs, items); err != nil {
		return 0, fmt.Errorf("dynamostore: purge runs: %w", err)
	}
	s.deletePayloads(ctx, items)
	return len(items), nil
}

// DeleteUnclaimedRun removes a run that no attempt has claimed yet, with its
// payloads: the SQS run queue's undo when the message for a run it just
// created could not be sent. A run that an attempt claimed (its message was
// delivered after all) or finished stays, and the result is ErrConflict
// with code RUN_CLAIMED or RUN_FINISHED; a missing run, or one of another
// project, is ErrNotFound.
func (s *Store) DeleteUnclaimedRun(ctx context.Context, project, id string) error {
	out, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &s.t.Runs, Key: runKey(id),
		ConditionExpression: aws.String("#project = :project AND #status = :running AND " +
			"attribute_not_exists(#lease) AND (attribute_not_exists(#attempts) OR #attempts = :zero)"),
		ExpressionAttributeNames: map[string]string{
			"#project": attrProject, "#status": "status", "#lease": attrLeaseUntil, "#attempts": "attempts",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":project": str(project), ":running": str(string(automation.RunRunning)), ":zero": num(0),
		},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if old, ok := conditionFailed(err); ok {
		if len(old) == 0 {
			out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Runs, Key: runKey(id), ConsistentRead: aws.Bool(true)})
			if err != nil {
				return fmt.Errorf("dynamostore: delete run %s: %w", id, err)
			}
			old = out.Item
		}
		r := reader{item: old}
		switch status := automation.RunStatus(r.str("status")); {
		case len(old) == 0 || r.str(attrProject) != project:
			return automation.NotFound("run", id)
		case status.Final():
			return automation.RunFinished(id, status)
		default:
			return automation.RunClaimed(id)
		}
	}
	if err != nil {
		return fmt.Errorf("dynamostore: delete run %s: %w", id, err)
	}
	s.deletePayloads(ctx, []map[string]types.AttributeValue{out.Attributes})
	return nil
}
