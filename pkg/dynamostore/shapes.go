package dynamostore

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// The shape registry: one item per path shape in use, in a partition per
// segment count ("#shapes/<n>", which no route's "/"-prefixed key can be),
// sort key the shape, with the holding project and the set of its flows,
// kept like the path's owner item. A request path with no literal route
// for its method reads its segment count's partition to find the parameter
// shape that matches it; a write reads it to refuse an overlapping shape
// (automation.CheckShapeClash). That read and the write are not one
// transaction: two flows saved at the same instant with different, yet
// overlapping, shapes can both be accepted; the receivers then pick the
// more literal shape. Same-shape clashes stay atomic (route and owner
// items).
func shapesPartition(segments int) string { return "#shapes/" + strconv.Itoa(segments) }

func shapeKey(shape string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPath: str(shapesPartition(automation.Segments(shape))), attrMethod: str(shape),
	}
}

func (s *Store) registerShape(f automation.Flow, shape string) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: &s.t.Routes, Key: shapeKey(shape),
		UpdateExpression:         aws.String("SET #project = :project ADD #flows :flow"),
		ExpressionAttributeNames: map[string]string{"#project": attrProject, "#flows": attrOwnerFlow},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":project": str(f.Project), ":flow": &types.AttributeValueMemberSS{Value: []string{f.ID}},
		},
	}}
}

func (s *Store) unregisterShape(flowID, shape string) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: &s.t.Routes, Key: shapeKey(shape),
		UpdateExpression:          aws.String("DELETE #flows :flow"),
		ExpressionAttributeNames:  map[string]string{"#flows": attrOwnerFlow},
		ExpressionAttributeValues: map[string]types.AttributeValue{":flow": &types.AttributeValueMemberSS{Value: []string{flowID}}},
	}}
}

// RouteShapes lists the shapes in use with that many segments.
func (s *Store) RouteShapes(ctx context.Context, segments int) ([]automation.ShapeOwner, error) {
	return s.routeShapes(ctx, segments, "")
}

// routeShapes reads a segment count's registry, leaving out shapes that
// only flow except holds.
func (s *Store) routeShapes(ctx context.Context, segments int, except string) ([]automation.ShapeOwner, error) {
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 &s.t.Routes,
		KeyConditionExpression:    aws.String("#p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": attrPath},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(shapesPartition(segments))},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: route shapes: %w", err)
	}
	var out []automation.ShapeOwner
	for _, it := range items {
		set, ok := it[attrOwnerFlow].(*types.AttributeValueMemberSS)
		if !ok || len(set.Value) == 0 || (len(set.Value) == 1 && set.Value[0] == except) {
			continue
		}
		r := reader{item: it}
		so := automation.ShapeOwner{Shape: r.str(attrMethod), Project: r.str(attrProject)}
		if r.err != nil {
			return nil, fmt.Errorf("dynamostore: route shapes: %w", r.err)
		}
		out = append(out, so)
	}
	return out, nil
}

// checkShape refuses f's shape when it clashes with a held one.
func (s *Store) checkShape(ctx context.Context, f automation.Flow) error {
	shape := routesPath(f)
	if shape == "" {
		return nil
	}
	held, err := s.routeShapes(ctx, automation.Segments(shape), f.ID)
	if err != nil {
		return err
	}
	held = slices.DeleteFunc(held, func(h automation.ShapeOwner) bool { return h.Shape == shape })
	return automation.CheckShapeClash(shape, f.Project, held)
}
