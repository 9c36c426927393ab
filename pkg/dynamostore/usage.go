package dynamostore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

var _ automation.UsageStore = (*Store)(nil)

// A project's stored bytes are counted as its runs finish, not measured:
// summing the runs table would read every byte it counts. The write that
// adds a finished run to its flow's statistics (addStats) adds the run's
// size (automation.RunSize) to a counter of its creation day on the flow
// item, storedBytes#YYYYMMDD, and removes the counter that fell out of the
// retention window. A run expires (TTL) with its creation day's retention,
// so the project's usage is the sum of its flows' counters of the days
// still retained: no write more per run, and a measurement reads the
// project's flow items. Runs not finished yet, webhook samples (one per
// flow, at most the body limit) and flow state (at most 64 KiB per flow)
// are not counted here (docs/reliability.md). The flow's kept versions
// are, through its versionBytes counter (versions.go).
const attrBytesPrefix = "storedBytes#"

// bytesDay names the counter of runs created on t's day (UTC).
func bytesDay(t time.Time) string { return attrBytesPrefix + t.UTC().Format("20060102") }

// usageTerms are what addStats' update adds for run r: the ADD of its
// size and the REMOVE of the counter a retention ago, with their names
// and values.
func (s *Store) usageTerms(r automation.Run, names map[string]string, values map[string]types.AttributeValue) (add, remove string) {
	names["#bytes"] = bytesDay(r.Created)
	names["#gone"] = bytesDay(r.Created.Add(-s.retention - 24*time.Hour))
	values[":bytes"] = num(automation.RunSize(r))
	return ", #bytes :bytes", " REMOVE #gone"
}

// StoredBytes sums the counters of the project's flows for the days its
// runs are still kept.
func (s *Store) StoredBytes(ctx context.Context, project string) (int64, error) {
	since := bytesDay(time.Now().Add(-s.retention))
	var (
		total int64
		start map[string]types.AttributeValue
	)
	for {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName: &s.t.Flows, IndexName: aws.String(indexByProject), ExclusiveStartKey: start,
			KeyConditionExpression:    aws.String("#p = :p"),
			ExpressionAttributeNames:  map[string]string{"#p": attrProject},
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(project)},
		})
		if err != nil {
			return 0, fmt.Errorf("dynamostore: stored bytes of project %s: list flows: %w", project, err)
		}
		keys := make([]map[string]types.AttributeValue, 0, len(out.Items))
		for _, it := range out.Items {
			keys = append(keys, map[string]types.AttributeValue{attrID: it[attrID]})
		}
		for len(keys) > 0 {
			batch := keys[:min(len(keys), 100)]
			keys = keys[len(batch):]
			for len(batch) > 0 {
				got, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
					s.t.Flows: {Keys: batch},
				}})
				if err != nil {
					return 0, fmt.Errorf("dynamostore: stored bytes of project %s: read flows: %w", project, err)
				}
				for _, item := range got.Responses[s.t.Flows] {
					total += retainedBytes(item, since) + versionBytes(item)
				}
				batch = got.UnprocessedKeys[s.t.Flows].Keys
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return total, nil
		}
		start = out.LastEvaluatedKey
	}
}

// versionBytes is what a flow item counts for its kept versions
// (versions.go).
func versionBytes(item map[string]types.AttributeValue) int64 {
	r := reader{item: item}
	return r.int(attrVersionBytes)
}

// retainedBytes sums a flow item's counters of days from since on.
func retainedBytes(item map[string]types.AttributeValue, since string) int64 {
	var n int64
	for name, av := range item {
		v, ok := av.(*types.AttributeValueMemberN)
		if !ok || !strings.HasPrefix(name, attrBytesPrefix) || name < since {
			continue
		}
		if b, err := strconv.ParseInt(v.Value, 10, 64); err == nil {
			n += b
		}
	}
	return n
}
