package dynamostore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

var _ automation.RateBuckets = (*Buckets)(nil)

// Buckets are the projects' rate buckets (webhooksPerSecond,
// outboundPerMinute, runsPerMinute) as items of the projects table, pk "bucket#<key>",
// shared by every Lambda environment: the Lambda backend's
// automation.RateBuckets.
//
// Each item holds one number, tat (the generic cell rate algorithm's
// "theoretical arrival time", in microseconds since the epoch): a token is
// there when tat <= now + (burst-1)·interval, and taking it moves tat to
// max(tat, now) + interval. DynamoDB has no max, so the take is one of two
// conditional UpdateItems, chosen by the tat this environment saw last:
//
//   - idle (tat <= now, or no item): SET tat = now + interval;
//   - busy (now < tat <= now + tolerance): SET tat = tat + interval.
//
// The guess is right whenever one environment delivers a project's
// traffic, and for the busy case whenever the bucket is busy: one write
// per admitted delivery. A wrong guess costs one more write (the failed
// condition answers the item, so the second is the right one); a refused
// delivery costs one write, with the exact wait. docs/aws.md, "Quotas per
// project".
type Buckets struct {
	db    API
	table string
	seen  sync.Map // key -> int64, the tat last written or read
}

// NewBuckets keeps the buckets in table (the stage's projects table).
func NewBuckets(client API, table string) *Buckets { return &Buckets{db: client, table: table} }

const attrTAT = "tat"

// Take takes one token from the bucket key, refilled rate tokens a second
// up to burst.
func (b *Buckets) Take(ctx context.Context, key string, rate float64, burst int64, now time.Time) (time.Duration, error) {
	if rate <= 0 || math.IsInf(rate, 1) {
		return 0, fmt.Errorf("dynamostore: bucket %s: rate %v", key, rate)
	}
	interval, tolerance := automation.BucketInterval(rate, burst) // microseconds
	t := now.UnixMicro()
	busy := false
	if v, ok := b.seen.Load(key); ok {
		busy = v.(int64) > t
	}
	for attempt := 0; attempt < 2; attempt++ {
		in := &dynamodb.UpdateItemInput{
			TableName: &b.table, Key: map[string]types.AttributeValue{attrPK: str("bucket#" + key)},
			ExpressionAttributeNames:            map[string]string{"#t": attrTAT},
			ReturnValues:                        types.ReturnValueUpdatedNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
		if busy {
			in.UpdateExpression = aws.String("SET #t = #t + :i")
			in.ConditionExpression = aws.String("#t > :now AND #t <= :lim")
			in.ExpressionAttributeValues = map[string]types.AttributeValue{":i": num(interval), ":now": num(t), ":lim": num(t + tolerance)}
		} else {
			in.UpdateExpression = aws.String("SET #t = :next")
			in.ConditionExpression = aws.String("attribute_not_exists(#t) OR #t <= :now")
			in.ExpressionAttributeValues = map[string]types.AttributeValue{":next": num(t + interval), ":now": num(t)}
		}
		out, err := b.db.UpdateItem(ctx, in)
		if err == nil {
			if v, ok := tatOf(out.Attributes); ok {
				b.seen.Store(key, v)
			}
			return 0, nil
		}
		old, failed := conditionFailed(err)
		if !failed {
			return 0, fmt.Errorf("dynamostore: take from bucket %s: %w", key, err)
		}
		tat, ok := tatOf(old)
		if !ok { // no item: only the idle form takes it
			busy = false
			continue
		}
		b.seen.Store(key, tat)
		if tat > t+tolerance {
			return time.Duration(tat-tolerance-t) * time.Microsecond, nil
		}
		busy = tat > t
	}
	// Two environments raced on the item twice: wait a token's time.
	return time.Duration(interval) * time.Microsecond, nil
}

// Peek reads the bucket key (one consistent GetItem) and takes nothing.
func (b *Buckets) Peek(ctx context.Context, key string, rate float64, burst int64, now time.Time) (int64, time.Duration, error) {
	if rate <= 0 || math.IsInf(rate, 1) {
		return 0, 0, fmt.Errorf("dynamostore: bucket %s: rate %v", key, rate)
	}
	out, err := b.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &b.table, Key: map[string]types.AttributeValue{attrPK: str("bucket#" + key)}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, 0, fmt.Errorf("dynamostore: read bucket %s: %w", key, err)
	}
	tat, ok := tatOf(out.Item)
	if !ok {
		return 0, 0, nil
	}
	b.seen.Store(key, tat)
	n, wait := automation.BucketLevel(tat, now.UnixMicro(), rate, burst)
	return n, wait, nil
}

func tatOf(item map[string]types.AttributeValue) (int64, bool) {
	v, ok := item[attrTAT].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}
