package dynamostore

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// avJSON is an attribute value as JSON, in DynamoDB's own notation
// ({"S":...}, {"M":{...}}): a payload that holds part of a run exactly as
// the item would have held it, so that reading it back goes through the
// same decoder as the item and gives back the same bytes (json.RawMessage
// fields are binaries there; re-marshalling them as JSON would compact
// and escape them).
type avJSON struct {
	S    *string            `json:"S,omitempty"`
	N    *string            `json:"N,omitempty"`
	B    *[]byte            `json:"B,omitempty"`
	BOOL *bool              `json:"BOOL,omitempty"`
	NULL bool               `json:"NULL,omitempty"`
	M    *map[string]avJSON `json:"M,omitempty"`
	L    *[]avJSON          `json:"L,omitempty"`
	SS   *[]string          `json:"SS,omitempty"`
	NS   *[]string          `json:"NS,omitempty"`
	BS   *[][]byte          `json:"BS,omitempty"`
}

// marshalAV encodes v as the item would hold it, in avJSON.
func marshalAV(v any) ([]byte, error) {
	av, err := defEncoder.Encode(v)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	j, err := toAVJSON(av)
	if err != nil {
		return nil, err
	}
	return json.Marshal(j)
}

// unmarshalAV decodes what marshalAV encoded into dst.
func unmarshalAV(data []byte, dst any) error {
	var j avJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	av, err := fromAVJSON(j)
	if err != nil {
		return err
	}
	return defDecoder.Decode(av, dst)
}

func toAVJSON(av types.AttributeValue) (avJSON, error) {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return avJSON{S: &v.Value}, nil
	case *types.AttributeValueMemberN:
		return avJSON{N: &v.Value}, nil
	case *types.AttributeValueMemberB:
		return avJSON{B: &v.Value}, nil
	case *types.AttributeValueMemberBOOL:
		return avJSON{BOOL: &v.Value}, nil
	case *types.AttributeValueMemberNULL:
		return avJSON{NULL: true}, nil
	case *types.AttributeValueMemberSS:
		return avJSON{SS: &v.Value}, nil
	case *types.AttributeValueMemberNS:
		return avJSON{NS: &v.Value}, nil
	case *types.AttributeValueMemberBS:
		return avJSON{BS: &v.Value}, nil
	case *types.AttributeValueMemberM:
		m := make(map[string]avJSON, len(v.Value))
		for k, e := range v.Value {
			je, err := toAVJSON(e)
			if err != nil {
				return avJSON{}, err
			}
			m[k] = je
		}
		return avJSON{M: &m}, nil
	case *types.AttributeValueMemberL:
		l := make([]avJSON, len(v.Value))
		for i, e := range v.Value {
			je, err := toAVJSON(e)
			if err != nil {
				return avJSON{}, err
			}
			l[i] = je
		}
		return avJSON{L: &l}, nil
	default:
		return avJSON{}, fmt.Errorf("encode: attribute value %T", av)
	}
}

func fromAVJSON(j avJSON) (types.AttributeValue, error) {
	switch {
	case j.S != nil:
		return &types.AttributeValueMemberS{Value: *j.S}, nil
	case j.N != nil:
		return &types.AttributeValueMemberN{Value: *j.N}, nil
	case j.B != nil:
		return &types.AttributeValueMemberB{Value: *j.B}, nil
	case j.BOOL != nil:
		return &types.AttributeValueMemberBOOL{Value: *j.BOOL}, nil
	case j.NULL:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case j.SS != nil:
		return &types.AttributeValueMemberSS{Value: *j.SS}, nil
	case j.NS != nil:
		return &types.AttributeValueMemberNS{Value: *j.NS}, nil
	case j.BS != nil:
		return &types.AttributeValueMemberBS{Value: *j.BS}, nil
	case j.M != nil:
		m := make(map[string]types.AttributeValue, len(*j.M))
		for k, e := range *j.M {
			av, err := fromAVJSON(e)
			if err != nil {
				return nil, err
			}
			m[k] = av
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case j.L != nil:
		l := make([]types.AttributeValue, len(*j.L))
		for i, e := range *j.L {
			av, err := fromAVJSON(e)
			if err != nil {
				return nil, err
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	default:
		return nil, fmt.Errorf("decode: attribute value without a type")
	}
}
