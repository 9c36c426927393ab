package dynamostore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// People live in the keys table beside the keys (docs/dynamodb.md), under
// their own key prefixes, none with a project attribute (so the byProject
// index of keys never sees them):
//
//   - "user#<id>": the user (email, passwordHash, created, sessionEpoch);
//   - "email#<email>": a pointer to the user, written in the user's
//     transaction with attribute_not_exists, which keeps emails unique;
//   - "members#<project>": the project's members, a map userId → {role,
//     created, seq}, and "memberships#<user>": the user's projects, the
//     same map by project; both written in one transaction. A project has
//     tens of members, so one item read lists them and one conditional
//     write changes one;
//   - "invite#<token hash>" and "session#<token hash>": set-up links and
//     sessions, with expiresAt (the table's TTL attribute) so that DynamoDB
//     drops them after they expire.
var _ automation.UserStore = (*Store)(nil)

func pk(s string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(s)}
}

// CreateUser writes the user and its email pointer in one transaction.
func (s *Store) CreateUser(ctx context.Context, u automation.User) error {
	rec := pk("user#" + u.ID)
	rec[attrID] = str(u.ID)
	rec["email"] = str(u.Email)
	rec["passwordHash"] = str(u.PasswordHash)
	rec["created"] = timeValue(u.Created)
	rec["sessionEpoch"] = num(u.SessionEpoch)
	ptr := pk("email#" + u.Email)
	ptr["userId"] = str(u.ID)
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.t.Keys, Item: rec, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		{Put: &types.Put{TableName: &s.t.Keys, Item: ptr, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
	}})
	if rs := cancelReasons(err); rs != nil && reasonCode(rs, 1) == reasonCondition {
		return automation.Conflict("USER_EXISTS", "a user with the email %s exists already", u.Email)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: create user %s: %w", u.ID, err)
	}
	return nil
}

func (s *Store) getItem(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Keys, Key: pk(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// User reads a user by ID.
func (s *Store) User(ctx context.Context, id string) (automation.User, error) {
	item, err := s.getItem(ctx, "user#"+id)
	if err != nil {
		return automation.User{}, fmt.Errorf("dynamostore: get user %s: %w", id, err)
	}
	if len(item) == 0 {
		return automation.User{}, automation.NotFound("user", id)
	}
	r := reader{item: item}
	u := automation.User{ID: r.str(attrID), Email: r.str("email"), PasswordHash: r.str("passwordHash"),
		Created: r.time("created"), SessionEpoch: r.int("sessionEpoch")}
	if r.err != nil {
		return automation.User{}, fmt.Errorf("dynamostore: decode user %s: %w", id, r.err)
	}
	return u, nil
}

// UserByEmail follows the email pointer.
func (s *Store) UserByEmail(ctx context.Context, email string) (automation.User, error) {
	item, err := s.getItem(ctx, "email#"+email)
	if err != nil {
		return automation.User{}, fmt.Errorf("dynamostore: get user by email: %w", err)
	}
	r := reader{item: item}
	id := r.str("userId")
	if r.err != nil || id == "" {
		return automation.User{}, automation.NotFound("user", email)
	}
	return s.User(ctx, id)
}

// updateUser runs one conditional update of an existing user.
func (s *Store) updateUser(ctx context.Context, op, id, expr string, values map[string]types.AttributeValue) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Keys, Key: pk("user#" + id), UpdateExpression: aws.String(expr),
		ConditionExpression: aws.String("attribute_exists(pk)"), ExpressionAttributeValues: values,
	})
	if _, ok := conditionFailed(err); ok {
		return automation.NotFound("user", id)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: %s %s: %w", op, id, err)
	}
	return nil
}

// SetPassword replaces the password hash.
func (s *Store) SetPassword(ctx context.Context, id, hash string) error {
	return s.updateUser(ctx, "set password", id, "SET passwordHash = :h", map[string]types.AttributeValue{":h": str(hash)})
}

// EndSessions adds one to the user's session epoch; sessions of earlier
// epochs are refused and expire by TTL.
func (s *Store) EndSessions(ctx context.Context, id string) error {
	return s.updateUser(ctx, "end sessions", id, "ADD sessionEpoch :one", map[string]types.AttributeValue{":one": num(1)})
}

// memberMap reads one of the two membership maps: "members#<project>"
// (by user) or "memberships#<user>" (by project).
func (s *Store) memberMap(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	item, err := s.getItem(ctx, key)
	if err != nil {
		return nil, err
	}
	m, _ := item["m"].(*types.AttributeValueMemberM)
	if m == nil {
		return map[string]types.AttributeValue{}, nil
	}
	return m.Value, nil
}

func decodeMembership(project, user string, v types.AttributeValue) (automation.Membership, int64, error) {
	m, ok := v.(*types.AttributeValueMemberM)
	if !ok {
		return automation.Membership{}, 0, fmt.Errorf("membership %s/%s: not a map", project, user)
	}
	r := reader{item: m.Value}
	out := automation.Membership{Project: project, User: user, Role: automation.Role(r.str("role")), Created: r.time("created")}
	seq := r.int("seq")
	return out, seq, r.err
}

// PutMembership writes the membership into both maps in one transaction;
// a replaced membership keeps its created time and place.
func (s *Store) PutMembership(ctx context.Context, m automation.Membership) error {
	seq := m.Created.UnixNano()
	if old, err := s.Membership(ctx, m.Project, m.User); err == nil {
		m.Created = old.Created
		if members, err := s.memberMap(ctx, "members#"+m.Project); err == nil {
			if _, oldSeq, err := decodeMembership(m.Project, m.User, members[m.User]); err == nil {
				seq = oldSeq
			}
		}
	} else if !automation.IsNotFound(err) {
		return err
	}
	val := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"role": str(string(m.Role)), "created": timeValue(m.Created), "seq": num(seq),
	}}
	put := func(key string) types.TransactWriteItem {
		return types.TransactWriteItem{Update: &types.Update{TableName: &s.t.Keys, Key: pk(key),
			// A map attribute must exist before a path into it is set.
			UpdateExpression:          aws.String("SET m = if_not_exists(m, :empty)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":empty": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}},
		}}
	}
	set := func(key, field string) types.TransactWriteItem {
		return types.TransactWriteItem{Update: &types.Update{TableName: &s.t.Keys, Key: pk(key),
			UpdateExpression:          aws.String("SET m.#f = :v"),
			ExpressionAttributeNames:  map[string]string{"#f": field},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": val},
		}}
	}
	// Two steps: DynamoDB refuses one transaction with two writes of an
	// item, and a path into a missing map. The maps' creation is
	// idempotent; the membership itself is written in one transaction.
	if _, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		put("members#" + m.Project), put("memberships#" + m.User),
	}}); err != nil {
		return fmt.Errorf("dynamostore: put membership %s/%s: %w", m.Project, m.User, err)
	}
	tx, err := s.audited(ctx, []types.TransactWriteItem{set("members#"+m.Project, m.User), set("memberships#"+m.User, m.Project)})
	if err != nil {
		return fmt.Errorf("dynamostore: put membership %s/%s: %w", m.Project, m.User, err)
	}
	if _, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx}); err != nil {
		return fmt.Errorf("dynamostore: put membership %s/%s: %w", m.Project, m.User, err)
	}
	return nil
}

// Membership reads the user's entry in the project's map.
func (s *Store) Membership(ctx context.Context, project, user string) (automation.Membership, error) {
	members, err := s.memberMap(ctx, "members#"+project)
	if err != nil {
		return automation.Membership{}, fmt.Errorf("dynamostore: get membership: %w", err)
	}
	v, ok := members[user]
	if !ok {
		return automation.Membership{}, automation.NotFound("user", user)
	}
	m, _, err := decodeMembership(project, user, v)
	if err != nil {
		return automation.Membership{}, fmt.Errorf("dynamostore: %w", err)
	}
	return m, nil
}

// sortedMemberships decodes a map and orders it oldest first.
func sortedMemberships(entries map[string]types.AttributeValue, decode func(k string, v types.AttributeValue) (automation.Membership, int64, error)) ([]automation.Membership, error) {
	type entry struct {
		m   automation.Membership
		seq int64
	}
	var es []entry
	for k, v := range entries {
		m, seq, err := decode(k, v)
		if err != nil {
			return nil, fmt.Errorf("dynamostore: %w", err)
		}
		es = append(es, entry{m, seq})
	}
	slices.SortFunc(es, func(a, b entry) int {
		if a.seq != b.seq {
			return int(min(max(a.seq-b.seq, -1), 1))
		}
		if a.m.Project+a.m.User < b.m.Project+b.m.User {
			return -1
		}
		return 1
	})
	out := make([]automation.Membership, len(es))
	for i, e := range es {
		out[i] = e.m
	}
	return out, nil
}

// Memberships lists the user's projects.
func (s *Store) Memberships(ctx context.Context, user string) ([]automation.Membership, error) {
	entries, err := s.memberMap(ctx, "memberships#"+user)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: list memberships: %w", err)
	}
	return sortedMemberships(entries, func(project string, v types.AttributeValue) (automation.Membership, int64, error) {
		return decodeMembership(project, user, v)
	})
}

// Members lists the project's members.
func (s *Store) Members(ctx context.Context, project string) ([]automation.Membership, error) {
	entries, err := s.memberMap(ctx, "members#"+project)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: list members: %w", err)
	}
	return sortedMemberships(entries, func(user string, v types.AttributeValue) (automation.Membership, int64, error) {
		return decodeMembership(project, user, v)
	})
}

// maxRevokedWithMember bounds the keys DeleteMembership revokes in its
// transaction (DynamoDB takes 100 items, two are the membership maps).
const maxRevokedWithMember = 97 // and the audit entry

// DeleteMembership removes the user from both maps and revokes the user's
// live keys in the project, in one transaction. A key made after the keys
// were listed is not in it, but works no more anyway: a personal key is
// checked against its user's membership on every request.
func (s *Store) DeleteMembership(ctx context.Context, project, user string, at time.Time) error {
	keys, err := s.Keys(ctx, project)
	if err != nil {
		return fmt.Errorf("dynamostore: remove member %s: %w", user, err)
	}
	items := []types.TransactWriteItem{
		{Update: &types.Update{TableName: &s.t.Keys, Key: pk("members#" + project),
			UpdateExpression: aws.String("REMOVE m.#u"), ConditionExpression: aws.String("attribute_exists(m.#u)"),
			ExpressionAttributeNames: map[string]string{"#u": user}}},
		{Update: &types.Update{TableName: &s.t.Keys, Key: pk("memberships#" + user),
			UpdateExpression: aws.String("REMOVE m.#p"), ExpressionAttributeNames: map[string]string{"#p": project}}},
	}
	for _, k := range keys {
		if k.User != user || k.Revoked != nil || len(items) >= 2+maxRevokedWithMember {
			continue
		}
		items = append(items, types.TransactWriteItem{Update: &types.Update{TableName: &s.t.Keys, Key: keyHashKey(k.Hash),
			UpdateExpression:          aws.String("SET revoked = if_not_exists(revoked, :at)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":at": timeValue(at)}}})
	}
	if items, err = s.audited(ctx, items); err != nil {
		return fmt.Errorf("dynamostore: remove member %s: %w", user, err)
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if rs := cancelReasons(err); rs != nil && reasonCode(rs, 0) == reasonCondition {
		return automation.NotFound("user", user)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: remove member %s: %w", user, err)
	}
	return nil
}

// expiresAtValue is a TTL attribute: epoch seconds.
func expiresAtValue(t time.Time) types.AttributeValue { return num(t.Unix()) }

// CreateInvitation stores a set-up link; DynamoDB drops it a day after it
// expires.
func (s *Store) CreateInvitation(ctx context.Context, inv automation.Invitation) error {
	rec := pk("invite#" + inv.Hash)
	rec["hash"] = str(inv.Hash)
	rec["userId"] = str(inv.User)
	rec["invitedTo"] = str(inv.Project) // not "project": kept out of the keys' byProject index
	rec["created"] = timeValue(inv.Created)
	rec["expires"] = timeValue(inv.Expires)
	rec[attrExpiresAt] = expiresAtValue(inv.Expires.Add(24 * time.Hour))
	if inv.Used != nil {
		rec["used"] = timeValue(*inv.Used)
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.t.Keys, Item: rec,
		ConditionExpression: aws.String("attribute_not_exists(pk)")}); err != nil {
		return fmt.Errorf("dynamostore: create invitation: %w", err)
	}
	return nil
}

func setupLinkNotFound() *automation.Error {
	return &automation.Error{Kind: automation.ErrNotFound, Code: "SETUP_LINK_NOT_FOUND", Message: "set-up link not found"}
}

// Invitation reads a set-up link by its hash.
func (s *Store) Invitation(ctx context.Context, hash string) (automation.Invitation, error) {
	item, err := s.getItem(ctx, "invite#"+hash)
	if err != nil {
		return automation.Invitation{}, fmt.Errorf("dynamostore: get invitation: %w", err)
	}
	if len(item) == 0 {
		return automation.Invitation{}, setupLinkNotFound()
	}
	r := reader{item: item}
	inv := automation.Invitation{Hash: r.str("hash"), User: r.str("userId"), Project: r.str("invitedTo"),
		Created: r.time("created"), Expires: r.time("expires"), Used: r.timePtr("used")}
	if r.err != nil {
		return automation.Invitation{}, fmt.Errorf("dynamostore: decode invitation: %w", r.err)
	}
	return inv, nil
}

// UseInvitation sets used once, by a conditional write.
func (s *Store) UseInvitation(ctx context.Context, hash string, at time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Keys, Key: pk("invite#" + hash), UpdateExpression: aws.String("SET used = :at"),
		ConditionExpression:                 aws.String("attribute_exists(pk) AND attribute_not_exists(used)"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":at": timeValue(at)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if item, ok := conditionFailed(err); ok {
		if len(item) == 0 {
			return setupLinkNotFound()
		}
		return automation.Conflict("SETUP_LINK_USED", "this set-up link has been used already; ask an admin for a new one")
	}
	if err != nil {
		return fmt.Errorf("dynamostore: use invitation: %w", err)
	}
	return nil
}

// CreateSession stores a session; DynamoDB drops it after it expires.
func (s *Store) CreateSession(ctx context.Context, sess automation.Session) error {
	rec := pk("session#" + sess.Hash)
	rec["hash"] = str(sess.Hash)
	rec["userId"] = str(sess.User)
	rec["epoch"] = num(sess.Epoch)
	rec["created"] = timeValue(sess.Created)
	rec["expires"] = timeValue(sess.Expires)
	rec[attrExpiresAt] = expiresAtValue(sess.Expires)
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.t.Keys, Item: rec}); err != nil {
		return fmt.Errorf("dynamostore: create session: %w", err)
	}
	return nil
}

// Session reads a session by its hash.
func (s *Store) Session(ctx context.Context, hash string) (automation.Session, error) {
	item, err := s.getItem(ctx, "session#"+hash)
	if err != nil {
		return automation.Session{}, fmt.Errorf("dynamostore: get session: %w", err)
	}
	if len(item) == 0 {
		return automation.Session{}, &automation.Error{Kind: automation.ErrNotFound, Code: "SESSION_NOT_FOUND", Message: "session not found"}
	}
	r := reader{item: item}
	sess := automation.Session{Hash: r.str("hash"), User: r.str("userId"), Epoch: r.int("epoch"),
		Created: r.time("created"), Expires: r.time("expires")}
	if r.err != nil {
		return automation.Session{}, fmt.Errorf("dynamostore: decode session: %w", r.err)
	}
	return sess, nil
}

// DeleteSession removes a session.
func (s *Store) DeleteSession(ctx context.Context, hash string) error {
	if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.t.Keys, Key: pk("session#" + hash)}); err != nil {
		return fmt.Errorf("dynamostore: delete session: %w", err)
	}
	return nil
}
