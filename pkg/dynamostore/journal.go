package dynamostore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// The step journal's entries (automation.StepPatch lists) are items of
// the runs table of their own, keyed "<run>#journal#<n>", beside the run's
// item: an entry is what one step changed, so neither the run's item nor
// its steps payload is written again while the attempt runs, and no item
// grows with the run (docs/reliability.md). The run item's journalLen
// says how many entries belong to it: a whole write of the run
// (runUpdate) removes it, and the entries it leaves behind are never read
// again; they expire with the run's retention (TTL).
const (
	attrJournalLen     = "journalLen"     // N: entries of the run's journal (automation.Run.JournalLen)
	attrPatches        = "patches"        // S: an entry's patches, JSON
	attrPatchesPayload = "patchesPayload" // S: key of an entry's patches stored with Payloads
)

func journalKey(runID string, n int) map[string]types.AttributeValue {
	return runKey(runID + "#journal#" + strconv.Itoa(n))
}

// AppendSteps adds entry r.JournalLen+1 to the journal of r's claimed
// attempt (see automation.RunStore), in one transaction with a conditional
// update of the run's journalLen: the attempt must hold the run, and its
// count of entries must be the run's, so that an attempt that lost its
// lease adds nothing. An entry too large for an item goes to Payloads.
func (s *Store) AppendSteps(ctx context.Context, r automation.Run, patches []automation.StepPatch) error {
	data, err := json.Marshal(patches)
	if err != nil {
		return fmt.Errorf("dynamostore: journal steps of run %s: %w", r.ID, err)
	}
	n := r.JournalLen + 1
	entry := journalKey(r.ID, n)
	entry[attrExpiresAt] = num(time.Now().Add(s.retention).Unix())
	if len(data) > s.threshold && s.payloads != nil {
		key := payloadKey(r.ID, "journal-"+strconv.Itoa(n), data)
		if err := s.payloads.Put(ctx, key, data); err != nil {
			return fmt.Errorf("dynamostore: journal steps of run %s: store entry: %w", r.ID, err)
		}
		entry[attrPatchesPayload] = str(key)
	} else {
		entry[attrPatches] = str(string(data))
	}
	// A run its flow's disabling marked (flowstop.go) journals no more.
	cond := "#project = :project AND #status = :running AND #token = :token AND attribute_not_exists(#stop) AND "
	values := map[string]types.AttributeValue{
		":project": str(r.Project), ":running": str(string(automation.RunRunning)), ":token": str(r.LeaseToken),
		":n": num(int64(n)),
	}
	if r.JournalLen == 0 {
		cond += "attribute_not_exists(#jl)"
	} else {
		cond += "#jl = :prev"
		values[":prev"] = num(int64(r.JournalLen))
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: &s.t.Runs, Key: runKey(r.ID),
			UpdateExpression:    aws.String("SET #jl = :n"),
			ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: map[string]string{
				"#project": attrProject, "#status": "status", "#token": attrLeaseToken, "#jl": attrJournalLen, "#stop": attrStopped,
			},
			ExpressionAttributeValues: values,
		}},
		{Put: &types.Put{TableName: &s.t.Runs, Item: entry}},
	}})
	if rs := cancelReasons(err); rs != nil && reasonCode(rs, 0) == reasonCondition {
		if s.runStopped(ctx, r) { // flowstop.go
			return automation.FlowStopped(r.ID)
		}
		if err := s.whyRefused(ctx, r); err != nil {
			return err
		}
		return automation.RunLeaseLost(r.ID) // held, but its journal is not the one this attempt extends
	}
	if err != nil {
		return fmt.Errorf("dynamostore: journal steps of run %s: %w", r.ID, err)
	}
	return nil
}

// foldJournal applies the journal entries the run item counts to r and
// sets r.JournalLen, reading them 100 at a time (BatchGetItem's limit).
func (s *Store) foldJournal(ctx context.Context, item map[string]types.AttributeValue, r *automation.Run) error {
	rd := reader{item: item}
	n := int(rd.int(attrJournalLen))
	if rd.err != nil {
		return rd.err
	}
	for from := 1; from <= n; from += 100 {
		to := min(from+99, n)
		keys := make([]map[string]types.AttributeValue, 0, to-from+1)
		for i := from; i <= to; i++ {
			keys = append(keys, journalKey(r.ID, i))
		}
		got := map[string]map[string]types.AttributeValue{}
		for len(keys) > 0 {
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				s.t.Runs: {Keys: keys, ConsistentRead: aws.Bool(true)},
			}})
			if err != nil {
				return fmt.Errorf("read journal: %w", err)
			}
			for _, it := range out.Responses[s.t.Runs] {
				got[(&reader{item: it}).str(attrID)] = it
			}
			keys = out.UnprocessedKeys[s.t.Runs].Keys
		}
		for i := from; i <= to; i++ {
			id := r.ID + "#journal#" + strconv.Itoa(i)
			it, ok := got[id]
			if !ok {
				return fmt.Errorf("journal entry %d is missing", i)
			}
			patches, err := s.entryPatches(ctx, it)
			if err != nil {
				return fmt.Errorf("journal entry %d: %w", i, err)
			}
			if err := automation.ApplyStepPatches(r, patches); err != nil {
				return fmt.Errorf("journal entry %d: %w", i, err)
			}
		}
	}
	r.JournalLen = n
	return nil
}

// entryPatches decodes a journal entry item, loading its payload if it
// has one.
func (s *Store) entryPatches(ctx context.Context, it map[string]types.AttributeValue) ([]automation.StepPatch, error) {
	var patches []automation.StepPatch
	rd := reader{item: it}
	if key := rd.str(attrPatchesPayload); key != "" && s.payloads != nil {
		return patches, s.getPayload(ctx, key, &patches)
	}
	if err := json.Unmarshal([]byte(rd.str(attrPatches)), &patches); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return patches, rd.err
}
