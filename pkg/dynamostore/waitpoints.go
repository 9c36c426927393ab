package dynamostore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// Waitpoints (automation/waitpoint.go: what APPROVAL steps and WAIT for a
// callback wait for) are items of the runs table, beside the runs they
// belong to, so that the run table's TTL removes them with their run's
// retention and the functions that write runs need no other table
// (docs/dynamodb.md, "runs"):
//
//   - the waitpoint, id = <runId>#wait#<step>: wpProject, doc (the
//     waitpoint as JSON), tokenHash (absent once void), wpVersion (N, the
//     optimistic lock every write is conditional on) and expiresAt (TTL).
//     An APPROVAL's also carries projectRunStatus = approvals#<project>#<status>
//     and createdSort, its entry in the byProjectStatus index: the inbox,
//     in a partition no run status names. It has no "project" attribute,
//     so that no run index (byProject, byFlow, byStatus) lists it.
//   - its token, id = waittoken#<sha-256 hex>: wpProject, wpItem (the
//     waitpoint's id) and expiresAt. Put with attribute_not_exists(id) in
//     the waitpoint's own transaction, deleted in the one that replaces or
//     voids it: a hash is held by one waitpoint, and a link is two reads
//     by key, strongly consistent.
//
// A decision that resumes the run adds, in the same TransactWriteItems, an
// update of the run item (nextAttemptAt = now, conditional on the run
// RUNNING in the project): the record says it is due, and the decision is
// refused with the run's write if the run item changes under it. The SQS
// message that executes it is the Service's (Waker), after the write.
const (
	waitSep           = "#wait#"
	waitTokenPrefix   = "waittoken#"
	attrWPProject     = "wpProject"
	attrWPDoc         = "doc"
	attrWPTokenHash   = "tokenHash"
	attrWPVersion     = "wpVersion"
	attrWPItem        = "wpItem"
	waitInboxPrefix   = "approvals#"
	waitpointAttempts = 10
)

var _ automation.WaitpointStore = (*Store)(nil)

// MaxWaitpointBytes bounds a waitpoint's document (its form, answers and
// a callback's body and headers), within DynamoDB's 400 KB item limit
// with room for the item's other attributes.
const MaxWaitpointBytes = 350_000

func waitpointID(runID, step string) string { return runID + waitSep + step }

func waitInbox(project, status string) string { return waitInboxPrefix + project + "#" + status }

// storedWaitpoint is a waitpoint item as read.
type storedWaitpoint struct {
	w       automation.Waitpoint
	project string
	version int64
}

func decodeWaitpoint(item map[string]types.AttributeValue) (storedWaitpoint, error) {
	rd := reader{item: item}
	sw := storedWaitpoint{project: rd.str(attrWPProject), version: rd.int(attrWPVersion)}
	doc, hash := rd.str(attrWPDoc), rd.str(attrWPTokenHash)
	if rd.err != nil {
		return sw, fmt.Errorf("dynamostore: decode waitpoint: %w", rd.err)
	}
	if err := json.Unmarshal([]byte(doc), &sw.w); err != nil {
		return sw, fmt.Errorf("dynamostore: decode waitpoint: %w", err)
	}
	sw.w.TokenHash = hash
	return sw, nil
}

func (s *Store) getWaitpoint(ctx context.Context, id string) (storedWaitpoint, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Runs, Key: runKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return storedWaitpoint{}, false, fmt.Errorf("dynamostore: read waitpoint: %w", err)
	}
	if len(out.Item) == 0 {
		return storedWaitpoint{}, false, nil
	}
	sw, err := decodeWaitpoint(out.Item)
	return sw, err == nil, err
}

// UpdateWaitpoint reads the waitpoint, has change change it, and writes it
// back in one TransactWriteItems conditional on the version read (a new
// one on its absence), with its token items and, when change wakes the
// run, the run item's nextAttemptAt. A lost race (the condition, or a
// TransactionConflict) reads again and calls change again.
func (s *Store) UpdateWaitpoint(ctx context.Context, project, runID, step string,
	change func(w *automation.Waitpoint, found bool) (bool, error)) (automation.Waitpoint, error) {
	id := waitpointID(runID, step)
	runGone := false // the run item is not RUNNING in the project: decide without it
	for try := range waitpointAttempts {
		if try > 0 {
			// Concurrent answers cancel each other's transactions
			// (TransactionConflict): spread the next tries.
			select {
			case <-ctx.Done():
				return automation.Waitpoint{}, ctx.Err()
			case <-time.After(time.Duration(rand.IntN(5*try)+1) * time.Millisecond):
			}
		}
		sw, found, err := s.getWaitpoint(ctx, id)
		if err != nil {
			return automation.Waitpoint{}, err
		}
		if found && sw.project != project {
			// Another project's: as none, and it may not be written.
			return automation.Waitpoint{}, automation.NotFound("approval", runID+"/"+step)
		}
		w, oldHash := sw.w, sw.w.TokenHash
		var before *automation.Waitpoint
		if found {
			// change may replace its slices; the Outbox compares states.
			b := sw.w
			b.Decisions = slices.Clone(sw.w.Decisions)
			before = &b
		} else {
			w = automation.Waitpoint{}
		}
		wake, err := change(&w, found)
		if err != nil {
			return automation.Waitpoint{}, err
		}
		w.Project, w.RunID, w.Step = project, runID, step
		tx, err := s.waitpointWrite(id, w, sw.version, found, oldHash, wake && !runGone)
		if err != nil {
			return automation.Waitpoint{}, err
		}
		events, err := s.waitpointEventPuts(ctx, before, w)
		if err != nil {
			return automation.Waitpoint{}, fmt.Errorf("dynamostore: waitpoint %s/%s event: %w", runID, step, err)
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: append(tx.items, events...)})
		if err == nil {
			s.noteFresh(events)
			w.Link = ""
			return w, nil
		}
		rs := cancelReasons(err)
		if rs == nil {
			return automation.Waitpoint{}, fmt.Errorf("dynamostore: write waitpoint %s/%s: %w", runID, step, err)
		}
		switch {
		case tx.newToken >= 0 && reasonCode(rs, tx.newToken) == reasonCondition:
			return automation.Waitpoint{}, fmt.Errorf("dynamostore: waitpoint %s/%s: token held by another waitpoint: %w", runID, step, automation.ErrConflict)
		case tx.run >= 0 && reasonCode(rs, tx.run) == reasonCondition:
			runGone = true // final or deleted: nothing to make due
		case !slices.ContainsFunc(rs, func(r types.CancellationReason) bool {
			return r.Code != nil && (*r.Code == reasonCondition || *r.Code == reasonTxnConflict)
		}):
			return automation.Waitpoint{}, fmt.Errorf("dynamostore: write waitpoint %s/%s: %w", runID, step, err)
		}
		// The waitpoint moved (its condition), or a transaction touched one
		// of the items at once: read again.
	}
	return automation.Waitpoint{}, fmt.Errorf("dynamostore: waitpoint %s/%s: still contended after %d tries: %w", runID, step, waitpointAttempts, automation.ErrConflict)
}

// waitpointEventPuts are the delivery items of the event the Outbox
// decides for a waitpoint write (before nil: none was read), appended to
// the write's own transaction after its items, whose condition is the
// version read, so that the request or decision and its event commit
// together. The transaction stays within DynamoDB's limits: at most 4
// items of the waitpoint's own and alerts.MaxSubscriptions deliveries
// (24 of 100), each payload at most alerts.MaxApprovalEventBytes beside
// a document of at most MaxWaitpointBytes (under 2 MB of 4).
func (s *Store) waitpointEventPuts(ctx context.Context, before *automation.Waitpoint, after automation.Waitpoint) ([]types.TransactWriteItem, error) {
	o := s.eventOutbox()
	if o == nil || after.Kind != automation.WaitApproval {
		return nil, nil
	}
	subs, err := s.projectSubscriptions(ctx, after.Project)
	if err != nil {
		return nil, err
	}
	out, err := o.WaitpointChanged(before, after, subs)
	if err != nil {
		return nil, err
	}
	return s.eventPuts(out.Event, out.Deliveries)
}

// waitpointTx is the transaction of a waitpoint write, with the positions
// of the items whose conditions say something (-1: absent).
type waitpointTx struct {
	items         []types.TransactWriteItem
	newToken, run int
}

func (s *Store) waitpointWrite(id string, w automation.Waitpoint, version int64, found bool, oldHash string, wake bool) (waitpointTx, error) {
	doc, err := json.Marshal(w)
	if err != nil {
		return waitpointTx{}, fmt.Errorf("dynamostore: encode waitpoint: %w", err)
	}
	if len(doc) > MaxWaitpointBytes {
		// An item holds at most 400 KB: a callback's body (up to 1 MiB on
		// flowd) or a decision's values that would pass it are refused
		// before the write, naming the bound.
		return waitpointTx{}, automation.InvalidCode("PAYLOAD_TOO_LARGE",
			"the answer would make its waitpoint %d bytes; on this deployment a waitpoint holds at most %d (DynamoDB's item limit)", len(doc), MaxWaitpointBytes)
	}
	expires := num(w.Created.Add(s.retention).Unix())
	item := map[string]types.AttributeValue{
		attrID: str(id), attrWPProject: str(w.Project), attrWPDoc: str(string(doc)),
		attrWPVersion: num(version + 1), attrExpiresAt: expires,
	}
	if w.TokenHash != "" {
		item[attrWPTokenHash] = str(w.TokenHash)
	}
	if w.Kind == automation.WaitApproval {
		item[attrProjectRunStatus] = str(waitInbox(w.Project, w.Status))
		item[attrCreatedSort] = str(createdSort(w.Created, id))
	}
	put := &types.Put{TableName: &s.t.Runs, Item: item}
	if found {
		put.ConditionExpression = aws.String("#v = :v")
		put.ExpressionAttributeNames = map[string]string{"#v": attrWPVersion}
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": num(version)}
	} else {
		put.ConditionExpression = aws.String("attribute_not_exists(id)")
	}
	tx := waitpointTx{items: []types.TransactWriteItem{{Put: put}}, newToken: -1, run: -1}
	if oldHash != w.TokenHash {
		if oldHash != "" {
			tx.items = append(tx.items, types.TransactWriteItem{Delete: &types.Delete{TableName: &s.t.Runs,
				Key: runKey(waitTokenPrefix + oldHash)}})
		}
		if w.TokenHash != "" {
			tx.newToken = len(tx.items)
			tx.items = append(tx.items, types.TransactWriteItem{Put: &types.Put{TableName: &s.t.Runs,
				Item: map[string]types.AttributeValue{
					attrID: str(waitTokenPrefix + w.TokenHash), attrWPProject: str(w.Project), attrWPItem: str(id),
					attrExpiresAt: expires,
				},
				ConditionExpression: aws.String("attribute_not_exists(id)"),
			}})
		}
	}
	if wake {
		tx.run = len(tx.items)
		tx.items = append(tx.items, types.TransactWriteItem{Update: &types.Update{TableName: &s.t.Runs, Key: runKey(w.RunID),
			UpdateExpression:         aws.String("SET #next = :at"),
			ConditionExpression:      aws.String("#project = :project AND #status = :running"),
			ExpressionAttributeNames: map[string]string{"#next": "nextAttemptAt", "#project": attrProject, "#status": "status"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":at": timeValue(answeredAt(w)),
				":project": str(w.Project), ":running": str(string(automation.RunRunning))},
		}})
	}
	return tx, nil
}

// answeredAt is when the answer that decided w came.
func answeredAt(w automation.Waitpoint) (t time.Time) {
	t = w.Created
	if n := len(w.Decisions); n > 0 {
		t = w.Decisions[n-1].At
	} else if w.Callback != nil {
		t = w.Callback.ReceivedAt
	}
	return t
}

// Waitpoint reads one waitpoint of the project, strongly consistent.
func (s *Store) Waitpoint(ctx context.Context, project, runID, step string) (automation.Waitpoint, error) {
	sw, found, err := s.getWaitpoint(ctx, waitpointID(runID, step))
	if err != nil {
		return automation.Waitpoint{}, err
	}
	if !found || sw.project != project {
		return automation.Waitpoint{}, automation.NotFound("approval", runID+"/"+step)
	}
	return sw.w, nil
}

// WaitpointByToken finds a waitpoint by its token's hash: the token item,
// then the waitpoint it names, which must still hold that hash.
func (s *Store) WaitpointByToken(ctx context.Context, tokenHash string) (automation.Waitpoint, error) {
	gone := automation.NotFound("approval", "")
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Runs, Key: runKey(waitTokenPrefix + tokenHash),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return automation.Waitpoint{}, fmt.Errorf("dynamostore: read waitpoint token: %w", err)
	}
	rd := reader{item: out.Item}
	id := rd.str(attrWPItem)
	if len(out.Item) == 0 || id == "" {
		return automation.Waitpoint{}, gone
	}
	sw, found, err := s.getWaitpoint(ctx, id)
	if err != nil {
		return automation.Waitpoint{}, err
	}
	if !found || sw.w.TokenHash != tokenHash {
		return automation.Waitpoint{}, gone
	}
	return sw.w, nil
}

// ListWaitpoints pages through a project's approvals of one status, newest
// first: one query of its inbox partition, then the items by key
// (eventually consistent, as the index is); one whose status moved since
// its entry was written is left out.
func (s *Store) ListWaitpoints(ctx context.Context, project string, q automation.ListQuery) (automation.Page[automation.Waitpoint], error) {
	page := automation.Page[automation.Waitpoint]{Items: []automation.Waitpoint{}}
	inbox := waitInbox(project, q.Status)
	in := &dynamodb.QueryInput{
		TableName: &s.t.Runs, IndexName: aws.String(indexByProjectStatus), ScanIndexForward: aws.Bool(false),
		KeyConditionExpression:    aws.String("#h = :h"),
		ExpressionAttributeNames:  map[string]string{"#h": attrProjectRunStatus},
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": str(inbox)},
	}
	if q.After != "" {
		id, err := positionID(q.After)
		if err != nil {
			return page, err
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{attrID: str(id), attrProjectRunStatus: str(inbox), attrCreatedSort: str(q.After)}
	}
	entries, more, err := s.queryPage(ctx, in, q.Limit)
	if err != nil {
		return page, fmt.Errorf("dynamostore: list waitpoints: %w", err)
	}
	if more {
		rd := reader{item: entries[len(entries)-1]}
		if page.Next = rd.str(attrCreatedSort); rd.err != nil || page.Next == "" {
			return page, fmt.Errorf("dynamostore: list waitpoints: entry without %s", attrCreatedSort)
		}
	}
	items, err := s.batchGet(ctx, s.t.Runs, entries)
	if err != nil {
		return page, fmt.Errorf("dynamostore: list waitpoints: %w", err)
	}
	byID := make(map[string]map[string]types.AttributeValue, len(items))
	for _, it := range items {
		rd := reader{item: it}
		byID[rd.str(attrID)] = it
	}
	for _, e := range entries {
		rd := reader{item: e}
		it, ok := byID[rd.str(attrID)]
		if !ok {
			continue // removed since the query
		}
		sw, err := decodeWaitpoint(it)
		if err != nil {
			return page, err
		}
		if sw.project != project || sw.w.Status != q.Status {
			continue
		}
		page.Items = append(page.Items, sw.w)
	}
	return page, nil
}
