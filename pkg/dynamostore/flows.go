package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// Attributes of the flows, routes and runs tables.
const (
	attrProjectStatus = "projectStatus" // project + "#" + status: the byStatus index's partition
	attrVersion       = "version"
	attrPath          = "path"   // routes: "/" + the webhook path, never empty
	attrMethod        = "method" // routes: GET, POST, PUT or DELETE
	attrFlowID        = "flowId"
)

// Run statistics: written only when a run finishes, never by PutFlow, so a
// flow update cannot lose a concurrent run's count.
const (
	attrFinished  = "finished"
	attrSucceeded = "succeeded"
	attrLastRun   = "lastRun"
)

// The definition (trigger, steps, allowlist) is stored as native maps and
// lists, encoded through the domain's json tags: stores never add their own
// tags to domain types, and secret fields keep what they hold (SecretMask
// once stored), where JSON would replace any value with the mask.
var (
	defEncoder = attributevalue.NewEncoder(func(o *attributevalue.EncoderOptions) { o.TagKey = "json" })
	defDecoder = attributevalue.NewDecoder(func(o *attributevalue.DecoderOptions) { o.TagKey = "json" })
)

// flowUpdateAttempts bounds DeleteFlow's retries when the flow changes
// between its read and its delete.
const flowUpdateAttempts = 3

func flowKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrID: str(id)}
}

// routePath is a route's partition key: "/" + path, so that even an empty
// path is a valid key.
func routePath(path string) string { return "/" + path }

func routeKey(r automation.Route) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPath: str(routePath(r.Path)), attrMethod: str(r.Method)}
}

// pathOwner is the sort key of the one item per path, beside its routes,
// that says which project holds the path: workflow builder paths are one
// namespace across projects. It holds the project and the set of that
// project's flows on the path; DynamoDB removes a set attribute when its
// last element is deleted, so a path with no flows left is free.
const (
	pathOwner     = "#owner"
	attrOwnerFlow = "flowIds"
)

func ownerKey(path string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPath: str(routePath(path)), attrMethod: str(pathOwner)}
}

// claimPath adds f to its path's owner item, on condition that no flow of
// another project holds the path.
func (s *Store) claimPath(f automation.Flow, path string) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: &s.t.Routes, Key: ownerKey(path),
		UpdateExpression:         aws.String("SET #project = :project ADD #flows :flow"),
		ConditionExpression:      aws.String("attribute_not_exists(#flows) OR #project = :project"),
		ExpressionAttributeNames: map[string]string{"#project": attrProject, "#flows": attrOwnerFlow},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":project": str(f.Project), ":flow": &types.AttributeValueMemberSS{Value: []string{f.ID}},
		},
	}}
}

// releasePath removes the flow from its path's owner item.
func (s *Store) releasePath(flowID, path string) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: &s.t.Routes, Key: ownerKey(path),
		UpdateExpression:          aws.String("DELETE #flows :flow"),
		ExpressionAttributeNames:  map[string]string{"#flows": attrOwnerFlow},
		ExpressionAttributeValues: map[string]types.AttributeValue{":flow": &types.AttributeValueMemberSS{Value: []string{flowID}}},
	}}
}

// routesPath is the path f's routes are on, or "" when it has none.
func routesPath(f automation.Flow) string {
	if rs := f.Routes(); len(rs) > 0 {
		return rs[0].Path
	}
	return ""
}

func routeConflict(r automation.Route) error {
	return automation.RouteConflict(r.Method, r.Path)
}

func flowModified(id string) error {
	return automation.FlowModified(id)
}

// flowAttrs returns the attributes a write of f sets: everything but the
// key, the creation time and the run statistics.
func flowAttrs(f automation.Flow) (map[string]types.AttributeValue, error) {
	trigger, err := defEncoder.Encode(f.Trigger)
	if err != nil {
		return nil, fmt.Errorf("encode trigger: %w", err)
	}
	steps, err := defEncoder.Encode(f.Steps)
	if err != nil {
		return nil, fmt.Errorf("encode steps: %w", err)
	}
	onError, err := defEncoder.Encode(f.OnError)
	if err != nil {
		return nil, fmt.Errorf("encode onError: %w", err)
	}
	ips, err := defEncoder.Encode(f.AllowedIPs)
	if err != nil {
		return nil, fmt.Errorf("encode allowlist: %w", err)
	}
	concurrency, err := defEncoder.Encode(f.Concurrency)
	if err != nil {
		return nil, fmt.Errorf("encode concurrency: %w", err)
	}
	throttle, err := defEncoder.Encode(f.Throttle)
	if err != nil {
		return nil, fmt.Errorf("encode throttle: %w", err)
	}
	attrs := map[string]types.AttributeValue{
		"name":            str(f.Name),
		"description":     str(f.Description),
		"status":          str(string(f.Status)),
		"engine":          str(string(f.Engine)),
		"triggerType":     str(string(f.TriggerType)),
		"updated":         timeValue(f.Updated),
		attrVersion:       num(f.Version),
		attrProjectStatus: str(f.Project + "#" + string(f.Status)),
		"trigger":         trigger,
		"steps":           steps,
		"onError":         onError,
		"allowedIPs":      ips,
	}
	attrs["managedBy"] = str(f.ManagedBy)
	attrs[attrLiveVersion] = num(f.LiveVersion)                              // versions.go
	attrs[attrHasDraft] = &types.AttributeValueMemberBOOL{Value: f.HasDraft} // versions.go
	if f.StoppedAt != nil {
		attrs[attrStoppedAt] = num(f.StoppedAt.UnixMilli()) // flowstop.go
	}
	attrs["concurrency"], attrs["throttle"] = concurrency, throttle
	return attrs, flowTooLarge(f, attrs)
}

func decodeFlow(item map[string]types.AttributeValue) (automation.Flow, error) {
	r := reader{item: item}
	f := automation.Flow{
		ID: r.str(attrID), Project: r.str(attrProject), Name: r.str("name"), Description: r.str("description"),
		Status: automation.FlowStatus(r.str("status")), Engine: automation.Engine(r.str("engine")),
		TriggerType: automation.TriggerType(r.str("triggerType")),
		Created:     r.time("created"), Updated: r.time("updated"), Version: r.int(attrVersion),
		ManagedBy: r.str("managedBy"), LiveVersion: r.int(attrLiveVersion), HasDraft: r.bool(attrHasDraft),
		StoppedAt: r.millisPtr(attrStoppedAt),
		Stats: automation.FlowStats{
			Finished: r.int(attrFinished), Succeeded: r.int(attrSucceeded), LastRun: r.timePtr(attrLastRun),
		},
	}
	if r.err == nil {
		r.err = decodeDef(item, &f)
	}
	if r.err != nil {
		return automation.Flow{}, fmt.Errorf("dynamostore: decode flow %s: %w", f.ID, r.err)
	}
	return f, nil
}

func decodeDef(item map[string]types.AttributeValue, f *automation.Flow) error {
	for name, dst := range map[string]any{"trigger": &f.Trigger, "steps": &f.Steps, "onError": &f.OnError, "allowedIPs": &f.AllowedIPs,
		"concurrency": &f.Concurrency, "throttle": &f.Throttle} {
		if av, ok := item[name]; ok {
			if err := defDecoder.Decode(av, dst); err != nil {
				return fmt.Errorf("attribute %s: %w", name, err)
			}
		}
	}
	return nil
}

func routeItem(r automation.Route, f automation.Flow) map[string]types.AttributeValue {
	item := routeKey(r)
	item[attrFlowID] = str(f.ID)
	item[attrProject] = str(f.Project)
	return item
}

// CreateFlow writes the flow and reserves its routes in one transaction.
func (s *Store) CreateFlow(ctx context.Context, f automation.Flow) error {
	return retryShapes(ctx, func() error {
		for attempt := 1; ; attempt++ {
			err := s.createFlow(ctx, f)
			if !errors.Is(err, errCountRaced) {
				return err
			}
			if attempt == flowCountAttempts {
				return fmt.Errorf("dynamostore: create flow %s: %w", f.ID, err)
			}
			select { // concurrent creates of one project: let them spread out
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt*attempt) * 10 * time.Millisecond):
			}
		}
	})
}

func (s *Store) createFlow(ctx context.Context, f automation.Flow) error {
	item, err := flowAttrs(f)
	if err != nil {
		return fmt.Errorf("dynamostore: create flow %s: %w", f.ID, err)
	}
	item[attrID] = str(f.ID)
	item[attrProject] = str(f.Project)
	item["created"] = timeValue(f.Created)
	item[attrCreatedSort] = str(createdSort(f.Created, f.ID))
	routes := f.Routes()
	tx := []types.TransactWriteItem{{Put: &types.Put{
		TableName: &s.t.Flows, Item: item, ConditionExpression: aws.String("attribute_not_exists(id)"),
	}}}
	for _, r := range routes {
		tx = append(tx, types.TransactWriteItem{Put: &types.Put{
			TableName: &s.t.Routes, Item: routeItem(r, f),
			ConditionExpression:      aws.String("attribute_not_exists(#path)"),
			ExpressionAttributeNames: map[string]string{"#path": attrPath},
		}})
	}
	if len(routes) > 0 {
		tx = append(tx, s.claimPath(f, routes[0].Path), s.registerShape(f, routes[0].Path))
		bump, err := s.checkShape(ctx, f)
		if err != nil {
			return err
		}
		tx = append(tx, *bump)
	}
	bumpAt := len(tx) - 1
	// The flows quota: the counter's conditional add commits with the flow (flowcount.go).
	count, err := s.countCreate(ctx, f)
	if err != nil {
		return fmt.Errorf("dynamostore: create flow %s: %w", f.ID, err)
	}
	countAt := len(tx)
	tx = append(tx, count)
	// flow.published, when a subscription wants it, commits with the flow (alerts.go).
	events, err := s.flowEventPuts(ctx, f.Project, nil, &f)
	if err != nil {
		return fmt.Errorf("dynamostore: create flow %s: %w", f.ID, err)
	}
	tx = append(tx, events...)
	versions, versionBytes, err := s.versionWrites(f) // versions.go
	if err != nil {
		return fmt.Errorf("dynamostore: create flow %s: %w", f.ID, err)
	}
	item[attrVersionBytes] = num(versionBytes)
	tx = append(tx, versions...)
	if tx, err = s.audited(ctx, tx); err != nil {
		return fmt.Errorf("dynamostore: create flow %s: %w", f.ID, err)
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
	if rs := cancelReasons(err); rs != nil {
		if reasonCode(rs, 0) == reasonCondition {
			return automation.Conflict("FLOW_EXISTS", "flow %s already exists", f.ID)
		}
		if c := reasonCode(rs, countAt); c == reasonCondition || c == reasonTxnConflict {
			return s.countFailed(ctx, f)
		}
		if len(routes) > 0 && reasonCode(rs, bumpAt) == reasonCondition {
			return shapesChanged()
		}
		if len(routes) > 0 && reasonCode(rs, len(routes)+1) == reasonCondition {
			return automation.PathTaken(routes[0])
		}
		for i, r := range routes {
			if reasonCode(rs, i+1) == reasonCondition {
				return routeConflict(r)
			}
		}
	}
	if itemSizeExceeded(err) {
		return flowRefusedForSize(f)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: create flow %s: %w", f.ID, err)
	}
	return nil
}

// getFlow reads a flow by ID, strongly consistent; nil if there is none.
func (s *Store) getFlow(ctx context.Context, id string) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Flows, Key: flowKey(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// Flow reads a flow of a project: a flow of another project is not found,
// exactly like a missing one.
func (s *Store) Flow(ctx context.Context, project, id string) (automation.Flow, error) {
	item, err := s.getFlow(ctx, id)
	if err != nil {
		return automation.Flow{}, fmt.Errorf("dynamostore: get flow %s: %w", id, err)
	}
	if len(item) == 0 {
		return automation.Flow{}, automation.NotFound("flow", id)
	}
	f, err := decodeFlow(item)
	if err != nil {
		return automation.Flow{}, err
	}
	if f.Project != project {
		return automation.Flow{}, automation.NotFound("flow", id)
	}
	return f, nil
}

// FlowByID reads a flow by its ID alone: flow IDs are unique across
// projects, so the table's key is the ID and this is one strongly
// consistent read, as the webhook receiver needs.
func (s *Store) FlowByID(ctx context.Context, id string) (automation.Flow, error) {
	item, err := s.getFlow(ctx, id)
	if err != nil {
		return automation.Flow{}, fmt.Errorf("dynamostore: get flow %s: %w", id, err)
	}
	if len(item) == 0 {
		return automation.Flow{}, automation.NotFound("flow", id)
	}
	return decodeFlow(item)
}

// PutFlow replaces a flow and moves its routes in one transaction whose
// first item checks the version read, so the routes it removes are the ones
// the stored flow holds.
func (s *Store) PutFlow(ctx context.Context, f automation.Flow) error {
	return retryShapes(ctx, func() error { return s.putFlow(ctx, f) })
}

func (s *Store) putFlow(ctx context.Context, f automation.Flow) error {
	storedItem, err := s.getFlow(ctx, f.ID)
	if err != nil {
		return fmt.Errorf("dynamostore: get flow %s: %w", f.ID, err)
	}
	if len(storedItem) == 0 {
		return automation.NotFound("flow", f.ID)
	}
	stored, err := decodeFlow(storedItem)
	if err != nil {
		return err
	}
	if stored.Project != f.Project {
		return automation.NotFound("flow", f.ID)
	}
	if stored.Version != f.Version-1 {
		return flowModified(f.ID)
	}
	attrs, err := flowAttrs(f)
	if err != nil {
		return fmt.Errorf("dynamostore: put flow %s: %w", f.ID, err)
	}
	// Versions past the plan's bound go in this write (versions.go).
	pruned, err := s.planPrune(ctx, f, storedItem)
	if err != nil {
		return fmt.Errorf("dynamostore: put flow %s: %w", f.ID, err)
	}
	versions, versionBytes, err := s.versionWrites(f)
	if err != nil {
		return fmt.Errorf("dynamostore: put flow %s: %w", f.ID, err)
	}
	update, names, values := setExpression(attrs)
	update = pruneUpdate(update, names, values, pruned, versionBytes)
	names["#project"], values[":project"] = attrProject, str(f.Project)
	names["#version"] = attrVersion
	values[":prev"] = num(f.Version - 1)
	tx := []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.t.Flows, Key: flowKey(f.ID), UpdateExpression: &update,
		ConditionExpression:                 aws.String("attribute_exists(id) AND #project = :project AND #version = :prev"),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}}
	added, removed := diffRoutes(stored.Routes(), f.Routes())
	// A route this flow holds already is written again: the condition lets
	// its owner through and stops every other flow.
	ownOrFree := aws.String("attribute_not_exists(#path) OR #flowId = :flowId")
	routeNames := map[string]string{"#path": attrPath, "#flowId": attrFlowID}
	routeValues := map[string]types.AttributeValue{":flowId": str(f.ID)}
	for _, r := range added {
		tx = append(tx, types.TransactWriteItem{Put: &types.Put{
			TableName: &s.t.Routes, Item: routeItem(r, f), ConditionExpression: ownOrFree,
			ExpressionAttributeNames: routeNames, ExpressionAttributeValues: routeValues,
		}})
	}
	for _, r := range removed {
		tx = append(tx, types.TransactWriteItem{Delete: &types.Delete{
			TableName: &s.t.Routes, Key: routeKey(r), ConditionExpression: ownOrFree,
			ExpressionAttributeNames: routeNames, ExpressionAttributeValues: routeValues,
		}})
	}
	// Moving to another path claims it (and releases the old one) in the
	// same transaction, after the routes.
	claimAt, bumpAt := -1, -1
	if oldPath, newPath := routesPath(stored), routesPath(f); oldPath != newPath {
		if newPath != "" {
			bump, err := s.checkShape(ctx, f)
			if err != nil {
				return err
			}
			claimAt = len(tx)
			tx = append(tx, s.claimPath(f, newPath), s.registerShape(f, newPath))
			tx = append(tx, *bump)
			bumpAt = len(tx) - 1
		}
		if oldPath != "" {
			tx = append(tx, s.releasePath(f.ID, oldPath), s.unregisterShape(f.ID, oldPath))
		}
	}
	// The flow's event, when a subscription wants it, commits with it (alerts.go).
	events, err := s.flowEventPuts(ctx, f.Project, &stored, &f)
	if err != nil {
		return fmt.Errorf("dynamostore: put flow %s: %w", f.ID, err)
	}
	tx = append(tx, events...)
	versionsAt := len(tx)
	tx = append(tx, versions...)
	if pruned != nil {
		tx = append(tx, pruned.deletes...)
	}
	if tx, err = s.audited(ctx, tx); err != nil {
		return fmt.Errorf("dynamostore: put flow %s: %w", f.ID, err)
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
	if rs := cancelReasons(err); rs != nil {
		switch reasonCode(rs, 0) {
		case reasonCondition:
			return s.putFlowFailed(ctx, f, rs[0])
		case reasonTxnConflict:
			return flowModified(f.ID)
		}
		if versionsConflict(rs, versionsAt, len(f.Publish)) {
			return flowModified(f.ID) // another publish took the number
		}
		if claimAt >= 0 && reasonCode(rs, claimAt) == reasonCondition {
			return automation.PathTaken(f.Routes()[0])
		}
		if bumpAt >= 0 && reasonCode(rs, bumpAt) == reasonCondition {
			return shapesChanged()
		}
		for i, r := range added {
			if reasonCode(rs, i+1) == reasonCondition {
				return routeConflict(r)
			}
		}
	}
	if itemSizeExceeded(err) {
		return flowRefusedForSize(f)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: put flow %s: %w", f.ID, err)
	}
	if f.StoppedAt != nil && (stored.StoppedAt == nil || !stored.StoppedAt.Equal(*f.StoppedAt)) {
		return s.stopRuns(ctx, f) // disabled now: flowstop.go
	}
	return nil
}

// putFlowFailed tells why PutFlow's condition on the flow failed: gone (or
// moved to no project of the caller's) or modified since it was read.
func (s *Store) putFlowFailed(ctx context.Context, f automation.Flow, reason types.CancellationReason) error {
	old := reason.Item
	if len(old) == 0 {
		// Not every emulator returns the item: read it.
		item, err := s.getFlow(ctx, f.ID)
		if err != nil {
			return fmt.Errorf("dynamostore: put flow %s: %w", f.ID, err)
		}
		old = item
	}
	r := reader{item: old}
	if len(old) == 0 || r.str(attrProject) != f.Project {
		return automation.NotFound("flow", f.ID)
	}
	return flowModified(f.ID)
}

// setExpression turns attributes into "SET #a0 = :a0, ...", in name order so
// that requests are reproducible.
func setExpression(attrs map[string]types.AttributeValue) (string, map[string]string, map[string]types.AttributeValue) {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	names := map[string]string{}
	values := map[string]types.AttributeValue{}
	expr := "SET "
	for i, k := range keys {
		n, v := "#a"+strconv.Itoa(i), ":a"+strconv.Itoa(i)
		if i > 0 {
			expr += ", "
		}
		expr += n + " = " + v
		names[n], values[v] = k, attrs[k]
	}
	return expr, names, values
}

// diffRoutes returns the routes of next that old lacks, and those of old
// that next lacks.
func diffRoutes(old, next []automation.Route) (added, removed []automation.Route) {
	for _, r := range next {
		if !slices.Contains(old, r) {
			added = append(added, r)
		}
	}
	for _, r := range old {
		if !slices.Contains(next, r) {
			removed = append(removed, r)
		}
	}
	return added, removed
}

// DeleteFlow deletes the flow, its routes and its sample in one
// transaction, then its runs. The transaction checks the version read, so routes added by a
// concurrent update are never left behind; on such a race it reads again.
func (s *Store) DeleteFlow(ctx context.Context, project, id string) error {
	for attempt := 1; ; attempt++ {
		f, err := s.Flow(ctx, project, id)
		if err != nil {
			return err
		}
		tx := []types.TransactWriteItem{{Delete: &types.Delete{
			TableName: &s.t.Flows, Key: flowKey(id),
			ConditionExpression:      aws.String("#project = :project AND #version = :version"),
			ExpressionAttributeNames: map[string]string{"#project": attrProject, "#version": attrVersion},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":project": str(project), ":version": num(f.Version),
			},
		}}}
		for _, r := range f.Routes() {
			tx = append(tx, types.TransactWriteItem{Delete: &types.Delete{
				TableName: &s.t.Routes, Key: routeKey(r),
				ConditionExpression:       aws.String("attribute_not_exists(#path) OR #flowId = :flowId"),
				ExpressionAttributeNames:  map[string]string{"#path": attrPath, "#flowId": attrFlowID},
				ExpressionAttributeValues: map[string]types.AttributeValue{":flowId": str(id)},
			}})
		}
		if p := routesPath(f); p != "" {
			tx = append(tx, s.releasePath(id, p), s.unregisterShape(id, p))
		}
		// The Test Trigger state goes with the flow, in the same write.
		tx = append(tx, s.sampleDeletes(id)...)
		// And the flow's STORE state (state.go).
		if d := s.stateDelete(id); d != nil {
			tx = append(tx, *d)
		}
		// And a POLL flow's seen keys (poll.go).
		if d := s.pollDelete(id); d != nil {
			tx = append(tx, *d)
		}
		// The project's flow count (flowcount.go).
		uncount, err := s.countDelete(ctx, project)
		if err != nil {
			return fmt.Errorf("dynamostore: delete flow %s: %w", id, err)
		}
		if uncount != nil {
			tx = append(tx, *uncount)
		}
		// flow.deleted, when a subscription wants it (alerts.go).
		events, err := s.flowEventPuts(ctx, project, &f, nil)
		if err != nil {
			return fmt.Errorf("dynamostore: delete flow %s: %w", id, err)
		}
		tx = append(tx, events...)
		if tx, err = s.audited(ctx, tx); err != nil {
			return fmt.Errorf("dynamostore: delete flow %s: %w", id, err)
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
		if rs := cancelReasons(err); rs != nil && attempt < flowUpdateAttempts {
			if c := reasonCode(rs, 0); c == reasonCondition || c == reasonTxnConflict {
				continue // changed or gone since read: the next read tells
			}
			if slices.ContainsFunc(rs, func(r types.CancellationReason) bool { return r.Code != nil && *r.Code == reasonTxnConflict }) {
				continue // the flow count, say, held by a concurrent create
			}
		}
		if err != nil {
			return fmt.Errorf("dynamostore: delete flow %s: %w", id, err)
		}
		if err := s.deleteVersions(ctx, f); err != nil { // versions.go
			return fmt.Errorf("dynamostore: delete versions of flow %s: %w", id, err)
		}
		break
	}
	if err := s.deleteRuns(ctx, project, id); err != nil {
		return fmt.Errorf("dynamostore: delete runs of flow %s: %w", id, err)
	}
	return nil
}

// deleteRuns removes runs of a deleted flow, found through the byFlow
// index: at most s.flowDeleteRuns of them, so that a DELETE of a flow with
// any number of runs stays within API Gateway's 29 s. The rest are left to
// the table's TTL (every run item carries expiresAt, its retention) and
// their payloads to the bucket's lifecycle rule: with the flow gone the API
// answers FLOW_NOT_FOUND for its runs, and no new run can appear, since the
// receivers and the runner read the flow first.
func (s *Store) deleteRuns(ctx context.Context, project, flowID string) error {
	if s.t.Runs == "" || s.flowDeleteRuns <= 0 {
		return nil
	}
	in := &dynamodb.QueryInput{
		TableName: &s.t.Runs, IndexName: aws.String(indexByFlow),
		KeyConditionExpression:    aws.String("#f = :f"),
		ProjectionExpression:      aws.String("#id, #tp, #sp"),
		ExpressionAttributeNames:  map[string]string{"#f": attrProjectFlow, "#id": attrID, "#tp": attrTriggerPayload, "#sp": attrStepsPayload},
		ExpressionAttributeValues: map[string]types.AttributeValue{":f": str(project + "#" + flowID)},
		Limit:                     aws.Int32(int32(s.flowDeleteRuns)),
	}
	var keys []map[string]types.AttributeValue
	for p := dynamodb.NewQueryPaginator(s.db, in); p.HasMorePages() && len(keys) < s.flowDeleteRuns; {
		out, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		keys = append(keys, out.Items...)
	}
	keys = keys[:min(len(keys), s.flowDeleteRuns)]
	if err := s.deleteByID(ctx, s.t.Runs, keys); err != nil {
		return err
	}
	s.deletePayloads(ctx, keys)
	return nil
}

// deleteByID deletes the items of a table keyed by id, 25 at a time
// (BatchWriteItem's maximum).
func (s *Store) deleteByID(ctx context.Context, table string, items []map[string]types.AttributeValue) error {
	for chunk := range slices.Chunk(items, 25) {
		reqs := make([]types.WriteRequest, len(chunk))
		for i, k := range chunk {
			reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: map[string]types.AttributeValue{attrID: k[attrID]}}}
		}
		if err := s.batchWrite(ctx, table, reqs); err != nil {
			return err
		}
	}
	return nil
}

// batchWrite writes a batch, resending what DynamoDB left unprocessed
// (throttling) with a growing pause.
func (s *Store) batchWrite(ctx context.Context, table string, reqs []types.WriteRequest) error {
	pending := map[string][]types.WriteRequest{table: reqs}
	for attempt := 0; len(pending[table]) > 0; attempt++ {
		if attempt == 8 {
			return errors.New("batch write: items still unprocessed after 8 attempts")
		}
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
			}
		}
		out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
		if err != nil {
			return err
		}
		pending = out.UnprocessedItems
	}
	return nil
}

// ListFlows pages through a project's flows in creation order. With a
// status filter it queries the byStatus index, whose partition is
// (project, status), so every page is full: a FilterExpression would apply
// after Limit and return short pages.
func (s *Store) ListFlows(ctx context.Context, project string, q automation.ListQuery) (automation.Page[automation.Flow], error) {
	index, hashAttr, hashValue := indexByProject, attrProject, project
	if q.Status != "" {
		index, hashAttr, hashValue = indexByStatus, attrProjectStatus, project+"#"+q.Status
	}
	entries, next, err := s.listPage(ctx, s.t.Flows, index, hashAttr, hashValue, q, true)
	if err != nil {
		return automation.Page[automation.Flow]{}, fmt.Errorf("dynamostore: list flows of %s: %w", project, err)
	}
	// The indexes hold keys only (tables.go): the flows themselves are
	// one BatchGetItem away.
	items, err := s.batchGet(ctx, s.t.Flows, entries)
	if err != nil {
		return automation.Page[automation.Flow]{}, fmt.Errorf("dynamostore: list flows of %s: %w", project, err)
	}
	page := automation.Page[automation.Flow]{Items: make([]automation.Flow, 0, len(items)), Next: next}
	for _, it := range items {
		f, err := decodeFlow(it)
		if err != nil {
			return automation.Page[automation.Flow]{}, err
		}
		// The index lags the table: a flow moved to another status since
		// belongs to the other list.
		if f.Project != project || q.Status != "" && string(f.Status) != q.Status {
			continue
		}
		page.Items = append(page.Items, f)
	}
	return page, nil
}

// listPage reads one page of an index keyed (hashAttr, createdSort) on a
// table keyed by id, oldest first if forward, else newest first. The
// position is the createdSort of the page's last item: with the partition
// and the ID it holds, that is the whole ExclusiveStartKey, so positions
// stay short and need no encoding.
func (s *Store) listPage(ctx context.Context, table, index, hashAttr, hashValue string, q automation.ListQuery, forward bool) ([]map[string]types.AttributeValue, string, error) {
	in := &dynamodb.QueryInput{
		TableName: &table, IndexName: &index, ScanIndexForward: aws.Bool(forward),
		KeyConditionExpression:    aws.String("#h = :h"),
		ExpressionAttributeNames:  map[string]string{"#h": hashAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": str(hashValue)},
	}
	if q.After != "" {
		id, err := positionID(q.After)
		if err != nil {
			return nil, "", err
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			attrID: str(id), hashAttr: str(hashValue), attrCreatedSort: str(q.After),
		}
	}
	items, more, err := s.queryPage(ctx, in, q.Limit)
	if err != nil || !more {
		return items, "", err
	}
	r := reader{item: items[len(items)-1]}
	next := r.str(attrCreatedSort)
	if r.err != nil || next == "" {
		return nil, "", fmt.Errorf("item without %s", attrCreatedSort)
	}
	return items, next, nil
}

// RouteFlows reads the routes of a path: one strongly consistent query on
// the path's partition.
func (s *Store) RouteFlows(ctx context.Context, path string) (map[string]string, error) {
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 &s.t.Routes,
		KeyConditionExpression:    aws.String("#p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": attrPath},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(routePath(path))},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: routes of %q: %w", path, err)
	}
	m := make(map[string]string, len(items))
	for _, it := range items {
		r := reader{item: it}
		method := r.str(attrMethod)
		if method == pathOwner {
			continue
		}
		flow := r.str(attrFlowID)
		if r.err != nil {
			return nil, fmt.Errorf("dynamostore: routes of %q: %w", path, r.err)
		}
		m[method] = flow
	}
	return m, nil
}
