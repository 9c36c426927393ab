package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

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
// (automation.CheckShapeClash). The partition's "#version" item makes that
// read and the write one decision: every write that takes a shape bumps
// it, on condition that it is still the version read, so two flows saved
// at the same instant with overlapping shapes cannot both pass (the loser
// is a 409 that asks to try again). Same-shape clashes are atomic through
// the route and owner items as before.
func shapesPartition(segments int) string { return "#shapes/" + strconv.Itoa(segments) }

// shapesVersion is the sort key of a partition's version item.
const (
	shapesVersion   = "#version"
	attrShapesCount = "v"
)

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
	shapes, _, err := s.routeShapes(ctx, segments, "")
	return shapes, err
}

// routeShapes reads a segment count's registry, leaving out shapes that
// only flow except holds, and the partition's version ("" before the first
// write).
func (s *Store) routeShapes(ctx context.Context, segments int, except string) ([]automation.ShapeOwner, string, error) {
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 &s.t.Routes,
		KeyConditionExpression:    aws.String("#p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": attrPath},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(shapesPartition(segments))},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, "", fmt.Errorf("dynamostore: route shapes: %w", err)
	}
	var out []automation.ShapeOwner
	version := ""
	for _, it := range items {
		if v, ok := it[attrShapesCount].(*types.AttributeValueMemberN); ok {
			version = v.Value
			continue
		}
		set, ok := it[attrOwnerFlow].(*types.AttributeValueMemberSS)
		if !ok || len(set.Value) == 0 || (len(set.Value) == 1 && set.Value[0] == except) {
			continue
		}
		r := reader{item: it}
		so := automation.ShapeOwner{Shape: r.str(attrMethod), Project: r.str(attrProject)}
		if r.err != nil {
			return nil, "", fmt.Errorf("dynamostore: route shapes: %w", r.err)
		}
		out = append(out, so)
	}
	return out, version, nil
}

// checkShape refuses f's shape when it clashes with a held one, and
// returns the write that bumps the partition's version on condition that
// it is the one read; nil when f holds no route.
func (s *Store) checkShape(ctx context.Context, f automation.Flow) (*types.TransactWriteItem, error) {
	shape := routesPath(f)
	if shape == "" {
		return nil, nil
	}
	n := automation.Segments(shape)
	held, version, err := s.routeShapes(ctx, n, f.ID)
	if err != nil {
		return nil, err
	}
	held = slices.DeleteFunc(held, func(h automation.ShapeOwner) bool { return h.Shape == shape })
	if err := automation.CheckShapeClash(shape, f.Project, held); err != nil {
		return nil, err
	}
	cond, values := "attribute_not_exists(#v)", map[string]types.AttributeValue{":one": num(1)}
	if version != "" {
		cond, values[":read"] = "#v = :read", &types.AttributeValueMemberN{Value: version}
	}
	return &types.TransactWriteItem{Update: &types.Update{
		TableName: &s.t.Routes,
		Key: map[string]types.AttributeValue{
			attrPath: str(shapesPartition(n)), attrMethod: str(shapesVersion),
		},
		UpdateExpression:          aws.String("ADD #v :one"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#v": attrShapesCount},
		ExpressionAttributeValues: values,
	}}, nil
}

// shapesChanged is the answer when another write took a shape between
// checkShape's read and this write. CreateFlow and PutFlow read the shapes
// again and retry (retryShapes); a client sees it only when the race goes
// on past those tries.
func shapesChanged() error {
	return &shapeRace{automation.Conflict("ROUTE_CONFLICT", "webhook paths were changed by another request at the same time; try again")}
}

// shapeRace is a write that lost the shape registry's version check to a
// concurrent path change: the write did nothing and may be tried again.
type shapeRace struct{ err error }

func (e *shapeRace) Error() string { return e.err.Error() }
func (e *shapeRace) Unwrap() error { return e.err }

// shapeTries bounds how often a flow write that lost a shape race is
// tried again: every path write of the same segment count bumps the same
// version item, so concurrent saves of unrelated paths race too.
const shapeTries = 40

// retryShapes runs write until it does not lose a shape race, at most
// shapeTries times, pausing between tries for a random time under an
// exponential bound (at most 200 ms), so that many writers at once spread
// out instead of colliding again.
func retryShapes(ctx context.Context, write func() error) error {
	for i := 1; ; i++ {
		err := write()
		var race *shapeRace
		if !errors.As(err, &race) || i == shapeTries {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(1+rand.IntN(min(200, 1<<min(i, 8)))) * time.Millisecond):
		}
	}
}
