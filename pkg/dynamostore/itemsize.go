package dynamostore

import (
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"flowservice/pkg/automation"
)

// MaxItemSize is DynamoDB's limit on an item, names and values together.
const MaxItemSize = 400 << 10

// flowItemReserve is what a flow item holds besides flowAttrs: its key,
// creation time and run statistics.
const flowItemReserve = 4 << 10

// ItemSize is the size DynamoDB counts for an item: attribute names plus
// values as attrSize counts them. It is the one formula of the repository:
// the FLOW_TOO_LARGE check, the S3 offload threshold and the capacity units
// that deploy/cost_test.go counts for docs/cost.md all use it.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + attrSize(v)
	}
	return n
}

// attrSize follows DynamoDB's item size rules closely enough for a
// threshold well below the limit: strings and binaries by length, numbers
// by digits, 3 bytes per map or list plus 1 per element, names by length.
func attrSize(av types.AttributeValue) int {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value)/2 + 2
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + attrSize(e)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + attrSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, e := range v.Value {
			n += len(e)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, e := range v.Value {
			n += len(e)/2 + 2
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, e := range v.Value {
			n += len(e)
		}
		return n
	default:
		return 0
	}
}

// flowTooLarge refuses a flow whose item DynamoDB would reject, as a client
// error rather than a failed write. The management API takes bodies up to
// 1 MiB, which a definition can fill.
func flowTooLarge(f automation.Flow, attrs map[string]types.AttributeValue) error {
	if size := ItemSize(attrs) + flowItemReserve; size > MaxItemSize {
		return automation.InvalidCode("FLOW_TOO_LARGE",
			"flow %q takes %d bytes stored, over the %d a flow may take: move large constants out of its steps", f.Name, size, MaxItemSize)
	}
	return nil
}

// itemSizeExceeded tells a write DynamoDB refused for an item's size: a
// ValidationException ("Item size has exceeded the maximum allowed size",
// "Item size to update has exceeded ..."), or a transaction cancelled
// for a ValidationError naming the size. DynamoDB's measure is not
// ItemSize's (and moto counts an update's old and new item together), so
// flowTooLarge's check before the write cannot catch every one.
func itemSizeExceeded(err error) bool {
	if err == nil {
		return false
	}
	for _, r := range cancelReasons(err) {
		if aws.ToString(r.Code) == "ValidationError" && strings.Contains(aws.ToString(r.Message), "size") {
			return true
		}
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" && strings.Contains(ae.ErrorMessage(), "Item size")
}

// flowRefusedForSize is FLOW_TOO_LARGE for a flow write DynamoDB refused
// for its item's size.
func flowRefusedForSize(f automation.Flow) error {
	return automation.InvalidCode("FLOW_TOO_LARGE",
		"flow %q is over the size DynamoDB stores for a flow (400 KB with its bookkeeping): move large constants out of its steps", f.Name)
}
