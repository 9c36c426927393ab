package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
)

var _ alerts.Store = (*Store)(nil)

// The alerts table (Tables.Alerts) holds, under (pk, sk):
//
//   - a subscription at ("proj#<project>", "sub#<id>"): doc, its JSON with
//     the secret;
//   - a delivery at ("sub#<subscription>", "dlv#<id>"): doc, its JSON, and
//     payload, the event's body. Delivery IDs sort by creation, so a query
//     lists a subscription's deliveries newest first. While PENDING it
//     carries dueShard "due" and dueAt (fixed-width time + ID), the keys of
//     the sparse byDue index the sender queries; a claim moves dueAt past
//     the lease with a condition on its old value, so one sender wins.
//
// There is no event item: the event's ID, type and payload are in each of
// its deliveries, written in the same transaction as the run's finish.
const (
	attrSK       = "sk"
	attrDoc      = "doc"
	attrPayload  = "payload"
	attrDueShard = "dueShard"
	attrDueAt    = "dueAt"
	indexByDue   = "byDue"
	dueShard     = "due"
)

// subscriptionCacheTTL is how long a process trusts its copy of a
// project's subscriptions on the run path: a subscription made in the API
// function reaches warm runners within it. Writes through this Store drop
// the copy at once.
const subscriptionCacheTTL = 30 * time.Second

// alertCache holds the Outbox that decides the events of this store's
// changes (UseOutbox), and each project's subscriptions for it, so that a
// change in a project without any adds no request.
type alertCache struct {
	outbox   atomic.Pointer[alerts.Outbox]
	mu       sync.Mutex
	projects map[string]cachedSubs
	// gen counts writes through this Store: a load that began before one
	// is not kept, as it may have read the subscriptions before the write.
	gen uint64
	// written is set when this process wrote deliveries (AlertsWritten);
	// fresh holds their keys and due times, for ClaimDeliveries.
	written atomic.Bool
	fresh   []map[string]types.AttributeValue
}

// maxFresh bounds the keys of fresh deliveries a process remembers; the
// index finds the others.
const maxFresh = 1000

// noteFresh remembers the deliveries of puts, just committed. A write
// that carried none leaves AlertsWritten as it was: nothing to send.
func (s *Store) noteFresh(puts []types.TransactWriteItem) {
	if len(puts) == 0 {
		return
	}
	s.alerts.mu.Lock()
	defer s.alerts.mu.Unlock()
	for _, p := range puts {
		if p.Put == nil || len(s.alerts.fresh) >= maxFresh {
			continue
		}
		it := p.Put.Item
		if at, ok := it[attrDueAt]; ok {
			s.alerts.fresh = append(s.alerts.fresh, map[string]types.AttributeValue{attrPK: it[attrPK], attrSK: it[attrSK], attrDueAt: at})
		}
	}
	s.alerts.written.Store(true)
}

// takeFresh returns up to max remembered fresh deliveries and forgets them.
func (s *Store) takeFresh(max int) []map[string]types.AttributeValue {
	s.alerts.mu.Lock()
	defer s.alerts.mu.Unlock()
	n := min(max, len(s.alerts.fresh))
	out := slices.Clone(s.alerts.fresh[:n])
	s.alerts.fresh = slices.Delete(s.alerts.fresh, 0, n)
	return out
}

// AlertsWritten reports whether this Store wrote event deliveries since
// the last call, and clears the flag: the runner sends at once after a
// batch that wrote some, and otherwise leaves retries to the sweep, so
// that a batch without events makes no request for alerts.
func (s *Store) AlertsWritten() bool { return s.alerts.written.Swap(false) }

type cachedSubs struct {
	subs    []alerts.Subscription
	fetched time.Time
}

func alertsTables(t Tables) []*dynamodb.CreateTableInput {
	if t.Alerts == "" {
		return nil
	}
	s := func(name string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS}
	}
	key := func(name string, kt types.KeyType) types.KeySchemaElement {
		return types.KeySchemaElement{AttributeName: aws.String(name), KeyType: kt}
	}
	return []*dynamodb.CreateTableInput{{
		TableName:            aws.String(t.Alerts),
		AttributeDefinitions: []types.AttributeDefinition{s(attrPK), s(attrSK), s(attrDueShard), s(attrDueAt)},
		KeySchema:            []types.KeySchemaElement{key(attrPK, types.KeyTypeHash), key(attrSK, types.KeyTypeRange)},
		BillingMode:          types.BillingModePayPerRequest,
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName:  aws.String(indexByDue),
			KeySchema:  []types.KeySchemaElement{key(attrDueShard, types.KeyTypeHash), key(attrDueAt, types.KeyTypeRange)},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	}}
}

func subscriptionKey(project, id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str("proj#" + project), attrSK: str("sub#" + id)}
}

func deliveryKey(subscriptionID, id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str("sub#" + subscriptionID), attrSK: str("dlv#" + id)}
}

func dueAt(t time.Time, id string) string { return t.UTC().Format(sortTimeLayout) + "#" + id }

// subscriptionRecord is a subscription as stored: with its secret.
type subscriptionRecord struct {
	alerts.Subscription
	Project string `json:"project"`
	Secret  string `json:"secret"`
}

func subscriptionItem(sub alerts.Subscription) (map[string]types.AttributeValue, error) {
	doc, err := json.Marshal(subscriptionRecord{Subscription: sub, Project: sub.Project, Secret: sub.Secret.Reveal()})
	if err != nil {
		return nil, err
	}
	item := subscriptionKey(sub.Project, sub.ID)
	item[attrDoc] = str(string(doc))
	return item, nil
}

func decodeSubscription(item map[string]types.AttributeValue) (alerts.Subscription, error) {
	r := reader{item: item}
	var rec subscriptionRecord
	if err := json.Unmarshal([]byte(r.str(attrDoc)), &rec); err != nil {
		return alerts.Subscription{}, fmt.Errorf("decode subscription: %w", err)
	}
	sub := rec.Subscription
	sub.Project, sub.Secret = rec.Project, automation.Secret(rec.Secret)
	return sub, nil
}

func deliveryItem(d alerts.Delivery, payload []byte) (map[string]types.AttributeValue, error) {
	doc, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	item := deliveryKey(d.SubscriptionID, d.ID)
	item[attrProject] = str(d.Project)
	item[attrDoc] = str(string(doc))
	item[attrPayload] = str(string(payload))
	// DynamoDB's TTL removes it after alerts.Retention (CreateTables turns
	// TTL on for the alerts table); subscriptions carry no expiry.
	item[attrExpiresAt] = num(d.Created.Add(alerts.Retention).Unix())
	if d.Status == alerts.DeliveryPending && d.NextAttemptAt != nil {
		item[attrDueShard] = str(dueShard)
		item[attrDueAt] = str(dueAt(*d.NextAttemptAt, d.ID))
	}
	return item, nil
}

func decodeDelivery(item map[string]types.AttributeValue) (alerts.Delivery, error) {
	r := reader{item: item}
	var d alerts.Delivery
	if err := json.Unmarshal([]byte(r.str(attrDoc)), &d); err != nil {
		return alerts.Delivery{}, fmt.Errorf("decode delivery: %w", err)
	}
	d.Project = r.str(attrProject)
	return d, nil
}

// UseOutbox makes the store write the events o decides for its changes
// (alerts.Store); without an alerts table it writes none.
func (s *Store) UseOutbox(o *alerts.Outbox) { s.alerts.outbox.Store(o) }

// eventOutbox is the Outbox of this store's changes, nil when they have
// no events (none given, or no alerts table).
func (s *Store) eventOutbox() *alerts.Outbox {
	if s.t.Alerts == "" {
		return nil
	}
	return s.alerts.outbox.Load()
}

// projectSubscriptions returns the project's subscriptions, for the
// Outbox to choose from, from the cache when it is fresh.
func (s *Store) projectSubscriptions(ctx context.Context, project string) ([]alerts.Subscription, error) {
	s.alerts.mu.Lock()
	c, ok := s.alerts.projects[project]
	gen := s.alerts.gen
	s.alerts.mu.Unlock()
	if ok && time.Since(c.fetched) < subscriptionCacheTTL {
		return c.subs, nil
	}
	all, err := s.Subscriptions(ctx, project)
	if err != nil {
		return nil, err
	}
	s.alerts.mu.Lock()
	if s.alerts.projects == nil {
		s.alerts.projects = map[string]cachedSubs{}
	}
	if s.alerts.gen == gen {
		s.alerts.projects[project] = cachedSubs{subs: all, fetched: time.Now()}
	}
	s.alerts.mu.Unlock()
	return all, nil
}

func (s *Store) forgetSubscriptions(project string) {
	s.alerts.mu.Lock()
	s.alerts.gen++
	delete(s.alerts.projects, project)
	s.alerts.mu.Unlock()
}

// finishRun is FinishRun's write of the run: one UpdateItem, or, when the
// Outbox gives the run's finish an event, one TransactWriteItems of that
// update and the event's deliveries, so that the finish and its event
// commit together. A refused condition on the run comes back as a
// ConditionalCheckFailedException, as from the UpdateItem.
func (s *Store) finishRun(ctx context.Context, r automation.Run) error {
	puts, err := s.runEventPuts(ctx, r)
	if err != nil {
		return err
	}
	if len(puts) == 0 {
		return s.updateRun(ctx, r)
	}
	up, err := s.runUpdate(ctx, r, true)
	if err != nil {
		return err
	}
	items := append([]types.TransactWriteItem{{Update: up}}, puts...)
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		s.noteFresh(puts)
	}
	if rs := cancelReasons(err); rs != nil && reasonCode(rs, 0) == reasonCondition {
		return &types.ConditionalCheckFailedException{Message: aws.String("run " + r.ID + " refused the finish")}
	}
	return err
}

// runEventPuts are the delivery items of the event the Outbox decides for
// a finished run, none when it decides none.
func (s *Store) runEventPuts(ctx context.Context, r automation.Run) ([]types.TransactWriteItem, error) {
	o := s.eventOutbox()
	if o == nil {
		return nil, nil
	}
	subs, err := s.projectSubscriptions(ctx, r.Project)
	if err != nil {
		return nil, err
	}
	out, err := o.RunFinished(r, subs, func() (string, error) {
		got, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: &s.t.Flows, Key: flowKey(r.FlowID),
			ProjectionExpression: aws.String("#n"), ExpressionAttributeNames: map[string]string{"#n": "name"},
		})
		if err != nil {
			return "", fmt.Errorf("flow name for run event: %w", err)
		}
		return (&reader{item: got.Item}).str("name"), nil
	})
	if err != nil {
		return nil, err
	}
	return s.eventPuts(out.Event, out.Deliveries)
}

func (s *Store) eventPuts(e alerts.Event, ds []alerts.Delivery) ([]types.TransactWriteItem, error) {
	var puts []types.TransactWriteItem
	for _, d := range ds {
		item, err := deliveryItem(d, e.Payload)
		if err != nil {
			return nil, err
		}
		puts = append(puts, types.TransactWriteItem{Put: &types.Put{TableName: &s.t.Alerts, Item: item,
			ConditionExpression: aws.String("attribute_not_exists(pk)")}})
	}
	return puts, nil
}

// The writes of subscriptions, an event the Service adds (a ping) and a
// delivery's retry go through writeOne or audited: the request's audit
// entry, when its context carries one, commits in the same
// TransactWriteItems (audit.go).

// A project's subscriptions are counted in one item of its partition,
// sort key "count#subscriptions" (outside the "sub#" range lists read),
// whose conditional add commits with each create and which each delete
// takes 1 from: the alerts.MaxSubscriptions quota holds against
// concurrent creates. A project without the item (subscriptions made
// before it) has its first create count them, with a consistent query,
// and write the item on condition that no other create did first.
const (
	subCountSK       = "count#subscriptions"
	attrCount        = "n"
	subCountAttempts = 8
)

func subCountKey(project string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str("proj#" + project), attrSK: str(subCountSK)}
}

// readSubCount returns the project's subscription count, and false when
// it has no counter.
func (s *Store) readSubCount(ctx context.Context, project string) (int64, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Alerts, Key: subCountKey(project), ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item[attrCount] == nil {
		return 0, false, err
	}
	r := reader{item: out.Item}
	n := r.int(attrCount)
	return n, true, r.err
}

// CreateSubscription stores a new subscription, counted against the
// quota in the same transaction.
func (s *Store) CreateSubscription(ctx context.Context, sub alerts.Subscription) error {
	defer s.forgetSubscriptions(sub.Project)
	item, err := subscriptionItem(sub)
	if err != nil {
		return fmt.Errorf("dynamostore: create subscription %s: %w", sub.ID, err)
	}
	for attempt := 1; ; attempt++ {
		n, ok, err := s.readSubCount(ctx, sub.Project)
		if err == nil && !ok {
			var subs []alerts.Subscription
			subs, err = s.Subscriptions(ctx, sub.Project)
			n = int64(len(subs))
		}
		if err != nil {
			return fmt.Errorf("dynamostore: create subscription %s: %w", sub.ID, err)
		}
		if n >= alerts.MaxSubscriptions {
			return alerts.QuotaExceeded()
		}
		count := &types.Update{TableName: &s.t.Alerts, Key: subCountKey(sub.Project),
			ExpressionAttributeNames: map[string]string{"#n": attrCount}, ExpressionAttributeValues: map[string]types.AttributeValue{}}
		if ok {
			count.UpdateExpression = aws.String("ADD #n :one")
			count.ConditionExpression = aws.String("attribute_exists(#n) AND #n < :max")
			count.ExpressionAttributeValues[":one"] = num(1)
			count.ExpressionAttributeValues[":max"] = num(alerts.MaxSubscriptions)
		} else {
			count.UpdateExpression = aws.String("SET #n = :n")
			count.ConditionExpression = aws.String("attribute_not_exists(#n)")
			count.ExpressionAttributeValues[":n"] = num(n + 1)
		}
		tx, err := s.audited(ctx, []types.TransactWriteItem{
			{Put: &types.Put{TableName: &s.t.Alerts, Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
			{Update: count},
		})
		if err != nil {
			return fmt.Errorf("dynamostore: create subscription %s: %w", sub.ID, err)
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
		rs := cancelReasons(err)
		if reasonCode(rs, 0) == reasonCondition {
			return automation.Conflict("SUBSCRIPTION_EXISTS", "subscription %s already exists", sub.ID)
		}
		if c := reasonCode(rs, 1); (c == reasonCondition || c == reasonTxnConflict) && attempt < subCountAttempts {
			continue // counted by another create since read: read again (the quota, if full, says so)
		}
		if err != nil {
			return fmt.Errorf("dynamostore: create subscription %s: %w", sub.ID, err)
		}
		return nil
	}
}

// Subscription returns one subscription of the project.
func (s *Store) Subscription(ctx context.Context, project, id string) (alerts.Subscription, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Alerts, Key: subscriptionKey(project, id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return alerts.Subscription{}, fmt.Errorf("dynamostore: get subscription %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return alerts.Subscription{}, automation.NotFound("subscription", id)
	}
	return decodeSubscription(out.Item)
}

// Subscriptions lists the project's subscriptions in creation order.
func (s *Store) Subscriptions(ctx context.Context, project string) ([]alerts.Subscription, error) {
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		TableName: &s.t.Alerts, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :sub)"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str("proj#" + project), ":sub": str("sub#")},
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: list subscriptions: %w", err)
	}
	subs := make([]alerts.Subscription, 0, len(items))
	for _, it := range items {
		sub, err := decodeSubscription(it)
		if err != nil {
			return nil, fmt.Errorf("dynamostore: list subscriptions: %w", err)
		}
		subs = append(subs, sub)
	}
	sort.SliceStable(subs, func(i, j int) bool {
		if !subs[i].Created.Equal(subs[j].Created) {
			return subs[i].Created.Before(subs[j].Created)
		}
		return subs[i].ID < subs[j].ID
	})
	return subs, nil
}

// UpdateSubscription writes a subscription's status and failure start.
func (s *Store) UpdateSubscription(ctx context.Context, sub alerts.Subscription) error {
	item, err := subscriptionItem(sub)
	var failed bool
	if err == nil {
		failed, err = s.writeOne(ctx, types.TransactWriteItem{Put: &types.Put{TableName: &s.t.Alerts, Item: item,
			ConditionExpression: aws.String("attribute_exists(pk)")}})
	}
	s.forgetSubscriptions(sub.Project)
	if failed {
		return automation.NotFound("subscription", sub.ID)
	} else if err != nil {
		return fmt.Errorf("dynamostore: update subscription %s: %w", sub.ID, err)
	}
	return nil
}

// DeleteSubscription removes a subscription, then its deliveries.
func (s *Store) DeleteSubscription(ctx context.Context, project, id string) error {
	del := []types.TransactWriteItem{{Delete: &types.Delete{TableName: &s.t.Alerts, Key: subscriptionKey(project, id),
		ConditionExpression: aws.String("attribute_exists(pk)")}}}
	if _, counted, err := s.readSubCount(ctx, project); err != nil {
		return fmt.Errorf("dynamostore: delete subscription %s: %w", id, err)
	} else if counted {
		del = append(del, types.TransactWriteItem{Update: &types.Update{TableName: &s.t.Alerts, Key: subCountKey(project),
			UpdateExpression: aws.String("ADD #n :minus"), ConditionExpression: aws.String("attribute_exists(#n)"),
			ExpressionAttributeNames:  map[string]string{"#n": attrCount},
			ExpressionAttributeValues: map[string]types.AttributeValue{":minus": num(-1)}}})
	}
	tx, err := s.audited(ctx, del)
	if err == nil {
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
	}
	s.forgetSubscriptions(project)
	if reasonCode(cancelReasons(err), 0) == reasonCondition {
		return automation.NotFound("subscription", id)
	} else if err != nil {
		return fmt.Errorf("dynamostore: delete subscription %s: %w", id, err)
	}
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		TableName: &s.t.Alerts, ProjectionExpression: aws.String("#pk, #sk"),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str("sub#" + id)},
	})
	if err != nil {
		return fmt.Errorf("dynamostore: delete deliveries of subscription %s: %w", id, err)
	}
	// A delivery left by a failure here is skipped by the sender, which
	// finds no subscription for it.
	for _, it := range items {
		if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.t.Alerts,
			Key: map[string]types.AttributeValue{attrPK: it[attrPK], attrSK: it[attrSK]}}); err != nil {
			return fmt.Errorf("dynamostore: delete deliveries of subscription %s: %w", id, err)
		}
	}
	return nil
}

// AddEvent stores an event's deliveries in one transaction.
func (s *Store) AddEvent(ctx context.Context, e alerts.Event, ds []alerts.Delivery) error {
	puts, err := s.eventPuts(e, ds)
	if err == nil && len(puts) > 0 {
		var tx []types.TransactWriteItem
		if tx, err = s.audited(ctx, puts); err == nil {
			_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
		}
		if err == nil {
			s.noteFresh(puts)
		}
	}
	if err != nil {
		return fmt.Errorf("dynamostore: add event %s: %w", e.ID, err)
	}
	return nil
}

// ClaimDeliveries claims due deliveries: a query of the byDue index, then
// one conditional update per delivery that moves it past the lease. The
// index holds keys only, so admit is asked with the subscription alone
// (project ""), before the update: with admit, the query reads up to
// claimScan due deliveries to find the ones it takes.
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, max int, admit func(project, subscription string) bool) ([]alerts.Pending, error) {
	if s.t.Alerts == "" || max < 1 {
		return nil, nil
	}
	scan := max
	if admit != nil {
		scan = claimScan
	}
	// The deliveries this process just wrote first, by key: the index is
	// eventually consistent, and may not list them yet.
	keys := s.takeFresh(max)
	if len(keys) < scan {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName: &s.t.Alerts, IndexName: aws.String(indexByDue), Limit: aws.Int32(int32(scan - len(keys))),
			KeyConditionExpression:    aws.String("#shard = :due AND #at <= :now"),
			ExpressionAttributeNames:  map[string]string{"#shard": attrDueShard, "#at": attrDueAt},
			ExpressionAttributeValues: map[string]types.AttributeValue{":due": str(dueShard), ":now": str(dueAt(now, "~"))},
		})
		if err != nil {
			return nil, fmt.Errorf("dynamostore: claim deliveries: %w", err)
		}
		// Skip what the fresh keys hold already: a second claim would fail.
		seen := map[string]bool{}
		for _, k := range keys {
			seen[(&reader{item: k}).str(attrSK)] = true
		}
		for _, it := range out.Items {
			if !seen[(&reader{item: it}).str(attrSK)] {
				keys = append(keys, it)
			}
		}
	}
	subs := map[string]*alerts.Subscription{}
	var claimed []alerts.Pending
	leased := dueAt(now.Add(lease), "claim")
	admitted := 0
	for _, key := range keys {
		if admitted >= max {
			break
		}
		if admit != nil && !admit("", strings.TrimPrefix((&reader{item: key}).str(attrPK), "sub#")) {
			continue // its subscription or project has its share of the senders
		}
		admitted++
		res, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &s.t.Alerts, Key: map[string]types.AttributeValue{attrPK: key[attrPK], attrSK: key[attrSK]},
			UpdateExpression:          aws.String("SET #at = :leased"),
			ConditionExpression:       aws.String("#at = :old"),
			ExpressionAttributeNames:  map[string]string{"#at": attrDueAt},
			ExpressionAttributeValues: map[string]types.AttributeValue{":old": key[attrDueAt], ":leased": str(leased)},
			ReturnValues:              types.ReturnValueAllNew,
		})
		if _, ok := conditionFailed(err); ok {
			continue // another sender claimed it, or it was recorded meanwhile
		} else if err != nil {
			return claimed, fmt.Errorf("dynamostore: claim delivery: %w", err)
		}
		d, err := decodeDelivery(res.Attributes)
		if err != nil {
			return claimed, err
		}
		d.Claim = leased
		sub, ok := subs[d.SubscriptionID]
		if !ok {
			got, err := s.Subscription(ctx, d.Project, d.SubscriptionID)
			if err != nil && !errors.Is(err, automation.ErrNotFound) {
				return claimed, err
			}
			if err == nil {
				sub = &got
			}
			subs[d.SubscriptionID] = sub
		}
		if sub == nil {
			continue // deleted with its subscription in the meantime
		}
		claimed = append(claimed, alerts.Pending{Delivery: d, Subscription: *sub, Event: alerts.Event{
			ID: d.EventID, Project: d.Project, Type: d.EventType,
			Payload: json.RawMessage((&reader{item: res.Attributes}).str(attrPayload)),
		}})
	}
	return claimed, nil
}

// claimScan bounds the due deliveries a claim with admit reads through the
// index: one page of keys.
const claimScan = 100

// RecordAttempt writes a delivery after an attempt: due again at its next
// attempt while PENDING, out of the byDue index once final.
func (s *Store) RecordAttempt(ctx context.Context, d alerts.Delivery) error {
	doc, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("dynamostore: record delivery %s: %w", d.ID, err)
	}
	in := &dynamodb.UpdateItemInput{
		TableName: &s.t.Alerts, Key: deliveryKey(d.SubscriptionID, d.ID),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND #project = :project"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#project": attrProject, "#doc": attrDoc, "#shard": attrDueShard, "#at": attrDueAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":project": str(d.Project), ":doc": str(string(doc))},
	}
	if d.Status == alerts.DeliveryPending && d.NextAttemptAt != nil {
		in.UpdateExpression = aws.String("SET #doc = :doc, #shard = :due, #at = :at")
		in.ExpressionAttributeValues[":due"] = str(dueShard)
		in.ExpressionAttributeValues[":at"] = str(dueAt(*d.NextAttemptAt, d.ID))
	} else {
		in.UpdateExpression = aws.String("SET #doc = :doc REMOVE #shard, #at")
	}
	if d.Claim != "" {
		// A sender's result stands only while its claim does: a retry
		// (which moves dueAt) or a later claim wins over it.
		*in.ConditionExpression += " AND #at = :claim"
		in.ExpressionAttributeValues[":claim"] = str(d.Claim)
	}
	failed, err := s.writeOne(ctx, types.TransactWriteItem{Update: &types.Update{TableName: in.TableName, Key: in.Key,
		UpdateExpression: in.UpdateExpression, ConditionExpression: in.ConditionExpression,
		ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues}})
	if failed && d.Claim != "" {
		return nil // superseded, or deleted with its subscription
	} else if failed {
		return automation.NotFound("delivery", d.ID)
	} else if err != nil {
		return fmt.Errorf("dynamostore: record delivery %s: %w", d.ID, err)
	}
	return nil
}

// Deliveries lists a subscription's latest deliveries, newest first.
func (s *Store) Deliveries(ctx context.Context, project, subscriptionID string, limit int) ([]alerts.Delivery, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: &s.t.Alerts, ScanIndexForward: aws.Bool(false), Limit: aws.Int32(int32(limit)),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :dlv)"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str("sub#" + subscriptionID), ":dlv": str("dlv#")},
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: list deliveries: %w", err)
	}
	var ds []alerts.Delivery
	for _, it := range out.Items {
		d, err := decodeDelivery(it)
		if err != nil {
			return nil, fmt.Errorf("dynamostore: list deliveries: %w", err)
		}
		if d.Project == project {
			ds = append(ds, d)
		}
	}
	return ds, nil
}

// Delivery returns one delivery of the subscription.
func (s *Store) Delivery(ctx context.Context, project, subscriptionID, id string) (alerts.Delivery, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Alerts, Key: deliveryKey(subscriptionID, id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return alerts.Delivery{}, fmt.Errorf("dynamostore: get delivery %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return alerts.Delivery{}, automation.NotFound("delivery", id)
	}
	d, err := decodeDelivery(out.Item)
	if err != nil {
		return alerts.Delivery{}, err
	}
	if d.Project != project {
		return alerts.Delivery{}, automation.NotFound("delivery", id)
	}
	return d, nil
}

// flowEventPuts are the delivery items of the event the Outbox decides for
// a flow write (old nil: created; next nil: deleted), none when it decides
// none. The write appends them to its own transaction, after its items,
// which are conditioned on the flow as read (old), so that the flow
// change and its event commit together.
func (s *Store) flowEventPuts(ctx context.Context, project string, old, next *automation.Flow) ([]types.TransactWriteItem, error) {
	o := s.eventOutbox()
	if o == nil {
		return nil, nil
	}
	subs, err := s.projectSubscriptions(ctx, project)
	if err != nil {
		return nil, err
	}
	id := ""
	if next != nil {
		id = next.ID
	} else if old != nil {
		id = old.ID
	}
	out, err := o.FlowChanged(project, id, next, subs, func() (*automation.Flow, error) { return old, nil })
	if err != nil {
		return nil, err
	}
	return s.eventPuts(out.Event, out.Deliveries)
}

// setConnectionStatusWithEvent is SetConnectionStatus's write when the
// Outbox decides an event for it: the status update and the event's
// deliveries in one transaction, the update conditioned on the status
// read, so that the event says what changed. ok false: no event, and the
// caller writes as usual.
func (s *Store) setConnectionStatusWithEvent(ctx context.Context, update *types.Update, project, id string, st automation.ConnectionStatus) (ok bool, err error) {
	o := s.eventOutbox()
	if o == nil {
		return false, nil
	}
	subs, err := s.projectSubscriptions(ctx, project)
	if err != nil {
		return false, err
	}
	var c automation.Connection
	out, err := o.ConnectionChanged(project, st, subs, func() (automation.Connection, bool, error) {
		var err error
		c, err = s.Connection(ctx, project, id)
		if errors.Is(err, automation.ErrNotFound) {
			return c, false, nil // the caller's plain write answers not found
		}
		return c, err == nil, err
	})
	if err != nil || out.None() {
		return false, err
	}
	puts, err := s.eventPuts(out.Event, out.Deliveries)
	if err != nil {
		return false, err
	}
	update.ConditionExpression = aws.String(*update.ConditionExpression + " AND #status = :was")
	update.ExpressionAttributeValues[":was"] = str(string(c.Status))
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: append([]types.TransactWriteItem{{Update: update}}, puts...),
	})
	if rs := cancelReasons(err); rs != nil && reasonCode(rs, 0) == reasonCondition {
		// Gone, or changed since read: the caller's plain write tells.
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("dynamostore: set status of connection %s: %w", id, err)
	}
	s.noteFresh(puts)
	return true, nil
}

// enableAlertsTTL turns on TTL (expiresAt) for the alerts table, if any.
func enableAlertsTTL(ctx context.Context, client TableAPI, t Tables) error {
	if t.Alerts == "" {
		return nil
	}
	_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(t.Alerts),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrExpiresAt), Enabled: aws.Bool(true),
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) && !isTTLAlreadyEnabled(err) {
		return fmt.Errorf("dynamostore: enable TTL on %s: %w", t.Alerts, err)
	}
	return nil
}
