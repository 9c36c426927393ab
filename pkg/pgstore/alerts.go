package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
)

var _ alerts.Store = (*Store)(nil)

// alertState holds the Outbox that decides the events of this store's
// changes (UseOutbox), and caches every project's subscriptions for it: a
// change in a project without any costs a map lookup, no query. Every
// subscription write, on any node, announces itself on changesChannel at
// its commit, and every node's listener drops the cache (wake.go); the
// next change loads it again. The cache is kept only while the listener
// is connected, and for subscriptionsExpiry at most whatever happens.
type alertState struct {
	outbox atomic.Pointer[alerts.Outbox]
	subs   atomic.Pointer[subscriptionCache]
	// gen counts invalidations: a load that began before one (and so may
	// have read the old subscriptions) is not kept.
	mu       sync.Mutex
	gen      uint64
	wakeOnce sync.Once
	wake     chan struct{}
}

type subscriptionCache struct {
	byProject map[string][]alerts.Subscription
	expires   time.Time
}

// subscriptionsExpiry bounds how long a cached set of subscriptions is
// used: the fallback should a change notification be lost without the
// listener noticing (it proves its connection every listenCheck).
const subscriptionsExpiry = 5 * time.Second

// forgetSubscriptions drops the cache after a subscription write commits
// here or on another node.
func (s *Store) forgetSubscriptions() {
	s.alerts.mu.Lock()
	s.alerts.gen++
	s.alerts.subs.Store(nil)
	s.alerts.mu.Unlock()
}

// AlertsWritten is signalled (without blocking, coalesced) whenever an
// event is written, so that the sender wakes at once instead of at its
// next poll.
func (s *Store) AlertsWritten() <-chan struct{} {
	s.alerts.wakeOnce.Do(func() { s.alerts.wake = make(chan struct{}, 1) })
	return s.alerts.wake
}

func (s *Store) wakeAlerts() {
	s.alerts.wakeOnce.Do(func() { s.alerts.wake = make(chan struct{}, 1) })
	select {
	case s.alerts.wake <- struct{}{}:
	default:
	}
}

// UseOutbox makes the store write the events o decides for its changes
// (alerts.Store).
func (s *Store) UseOutbox(o *alerts.Outbox) { s.alerts.outbox.Store(o) }

// projectSubscriptions returns the cached subscriptions of project, for
// the Outbox to choose from.
func (s *Store) projectSubscriptions(ctx context.Context, project string) ([]alerts.Subscription, error) {
	if c := s.alerts.subs.Load(); c != nil && time.Now().Before(c.expires) {
		return c.byProject[project], nil
	}
	s.alerts.mu.Lock()
	gen := s.alerts.gen
	s.alerts.mu.Unlock()
	rows, err := s.r.QueryContext(ctx, `SELECT doc FROM alert_subscriptions ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("load subscriptions: %w", err)
	}
	defer rows.Close()
	m := map[string][]alerts.Subscription{}
	for rows.Next() {
		sub, err := scanSubscription(rows)
		if err != nil {
			return nil, err
		}
		m[sub.Project] = append(m[sub.Project], sub)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load subscriptions: %w", err)
	}
	s.alerts.mu.Lock()
	if s.alerts.gen == gen && s.wake.up.Load() {
		s.alerts.subs.Store(&subscriptionCache{byProject: m, expires: time.Now().Add(subscriptionsExpiry)})
	}
	s.alerts.mu.Unlock()
	return m[project], nil
}

// outboxRun writes, in the finish's transaction tx, the event the Outbox
// decides for the finished run r, if any.
func (s *Store) outboxRun(ctx context.Context, tx *txn, r automation.Run) error {
	o := s.alerts.outbox.Load()
	if o == nil {
		return nil
	}
	subs, err := s.projectSubscriptions(ctx, r.Project)
	if err != nil {
		return err
	}
	out, err := o.RunFinished(r, subs, func() (string, error) {
		var name string
		if err := s.queryRow(ctx, tx, `SELECT doc->>'name' FROM flows WHERE id = ?`, r.FlowID).Scan(&name); err != nil {
			return "", fmt.Errorf("flow name for run event: %w", err)
		}
		return name, nil
	})
	if err != nil {
		return err
	}
	return s.insertEvent(ctx, tx, out.Event, out.Deliveries)
}

// insertEvent writes an event and its deliveries in tx; without
// deliveries, nothing.
func (s *Store) insertEvent(ctx context.Context, tx *txn, e alerts.Event, ds []alerts.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO alert_events (id, project, type, created_ms, payload) VALUES (?, ?, ?, ?, ?)`,
		e.ID, e.Project, e.Type, e.Created.UnixMilli(), string(e.Payload)); err != nil {
		return fmt.Errorf("insert event: %w", err)
	}
	for _, d := range ds {
		doc, err := json.Marshal(d)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_deliveries (id, project, subscription, event, status, next_ms, doc)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			d.ID, d.Project, d.SubscriptionID, d.EventID, d.Status, d.NextAttemptAt.UnixMilli(), string(doc)); err != nil {
			return fmt.Errorf("insert delivery: %w", err)
		}
	}
	s.wakeAlerts()
	return nil
}

// subscriptionRecord is a subscription as stored: with its secret.
type subscriptionRecord struct {
	alerts.Subscription
	Project string `json:"project"`
	Secret  string `json:"secret"`
}

func encodeSubscription(sub alerts.Subscription) (string, error) {
	doc, err := json.Marshal(subscriptionRecord{Subscription: sub, Project: sub.Project, Secret: sub.Secret.Reveal()})
	return string(doc), err
}

func scanSubscription(row rowScanner) (alerts.Subscription, error) {
	var doc string
	if err := row.Scan(&doc); err != nil {
		return alerts.Subscription{}, err
	}
	var rec subscriptionRecord
	if err := json.Unmarshal([]byte(doc), &rec); err != nil {
		return alerts.Subscription{}, fmt.Errorf("decode subscription: %w", err)
	}
	sub := rec.Subscription
	sub.Project, sub.Secret = rec.Project, automation.Secret(rec.Secret)
	return sub, nil
}

// The writes of subscriptions, a ping (AddEvent) and a delivery's retry
// (RecordAttempt) go through writeAudited: the request's audit entry
// commits in their transaction (access.go).

// CreateSubscription stores a new subscription.
func (s *Store) CreateSubscription(ctx context.Context, sub alerts.Subscription) error {
	doc, err := encodeSubscription(sub)
	if err != nil {
		return fmt.Errorf("pgstore: create subscription %s: %w", sub.ID, err)
	}
	defer s.forgetSubscriptions() // after the commit
	return s.writeAudited(ctx, "create subscription "+sub.ID, func(tx *txn) error {
		// The quota, counted in the insert's transaction.
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM alert_subscriptions WHERE project = ?`, sub.Project).Scan(&n); err != nil {
			return err
		}
		if n >= alerts.MaxSubscriptions {
			return alerts.QuotaExceeded()
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_subscriptions (id, project, doc) VALUES (?, ?, ?)`, sub.ID, sub.Project, doc); err != nil {
			return err
		}
		return notifyChange(ctx, tx, "subscriptions")
	})
}

// Subscription returns one subscription of the project.
func (s *Store) Subscription(ctx context.Context, project, id string) (alerts.Subscription, error) {
	sub, err := scanSubscription(s.r.QueryRowContext(ctx,
		`SELECT doc FROM alert_subscriptions WHERE project = ? AND id = ?`, project, id))
	if errors.Is(err, sql.ErrNoRows) {
		return alerts.Subscription{}, automation.NotFound("subscription", id)
	} else if err != nil {
		return alerts.Subscription{}, fmt.Errorf("pgstore: get subscription %s: %w", id, err)
	}
	return sub, nil
}

// Subscriptions lists the project's subscriptions in creation order.
func (s *Store) Subscriptions(ctx context.Context, project string) ([]alerts.Subscription, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT doc FROM alert_subscriptions WHERE project = ? ORDER BY seq`, project)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list subscriptions: %w", err)
	}
	defer rows.Close()
	var subs []alerts.Subscription
	for rows.Next() {
		sub, err := scanSubscription(rows)
		if err != nil {
			return nil, fmt.Errorf("pgstore: list subscriptions: %w", err)
		}
		subs = append(subs, sub)
	}
	return subs, rows.Err()
}

// UpdateSubscription writes a subscription's status and failure start.
func (s *Store) UpdateSubscription(ctx context.Context, sub alerts.Subscription) error {
	doc, err := encodeSubscription(sub)
	if err != nil {
		return fmt.Errorf("pgstore: update subscription %s: %w", sub.ID, err)
	}
	defer s.forgetSubscriptions() // after the commit
	return s.writeAudited(ctx, "update subscription "+sub.ID, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE alert_subscriptions SET doc = ? WHERE project = ? AND id = ?`, doc, sub.Project, sub.ID)
		if err != nil {
			return err
		}
		if err := notFoundIfNone(res, "subscription", sub.ID); err != nil {
			return err
		}
		return notifyChange(ctx, tx, "subscriptions")
	})
}

// DeleteSubscription removes a subscription and its deliveries; events
// no delivery needs any more go with them.
func (s *Store) DeleteSubscription(ctx context.Context, project, id string) error {
	defer s.forgetSubscriptions() // after the commit
	return s.writeAudited(ctx, "delete subscription "+id, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM alert_subscriptions WHERE project = ? AND id = ?`, project, id)
		if err != nil {
			return err
		}
		if err := notFoundIfNone(res, "subscription", id); err != nil {
			return err
		}
		if err := notifyChange(ctx, tx, "subscriptions"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM alert_deliveries WHERE subscription = ?`, id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM alert_events WHERE project = ?
			AND NOT EXISTS (SELECT 1 FROM alert_deliveries d WHERE d.event = alert_events.id)`, project)
		return err
	})
}

// AddEvent stores an event and its deliveries atomically.
func (s *Store) AddEvent(ctx context.Context, e alerts.Event, ds []alerts.Delivery) error {
	err := s.writeAudited(ctx, "add event "+e.ID, func(tx *txn) error { return s.insertEvent(ctx, tx, e, ds) })
	if err != nil {
		return fmt.Errorf("pgstore: add event %s: %w", e.ID, err)
	}
	return nil
}

// ClaimDeliveries claims due deliveries for lease, earliest due first;
// with admit, it reads up to alertClaimScan due deliveries to find the
// ones admit takes.
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, max int, admit func(project, subscription string) bool) ([]alerts.Pending, error) {
	var out []alerts.Pending
	if max < 1 {
		return nil, nil
	}
	until := now.Add(lease).UnixMilli()
	scan := max
	if admit != nil {
		scan = alertClaimScan
	}
	err := s.write(ctx, "claim deliveries", func(tx *txn) error {
		out = out[:0]
		ids, err := dueDeliveries(ctx, tx, now, scan, max, admit)
		if err != nil || len(ids) == 0 {
			return err
		}
		list, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `UPDATE alert_deliveries SET claim_until_ms = ?
			WHERE id IN (SELECT jsonb_array_elements_text(?::jsonb))
			RETURNING doc, project, (SELECT payload FROM alert_events e WHERE e.id = event),
				(SELECT doc FROM alert_subscriptions WHERE id = subscription)`,
			until, string(list))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var doc, project string
			var payload, subDoc sql.NullString
			if err := rows.Scan(&doc, &project, &payload, &subDoc); err != nil {
				return err
			}
			var p alerts.Pending
			if err := json.Unmarshal([]byte(doc), &p.Delivery); err != nil {
				return fmt.Errorf("decode delivery: %w", err)
			}
			if !payload.Valid || !subDoc.Valid {
				continue // deleted with its subscription in the meantime
			}
			p.Delivery.Project, p.Delivery.Claim = project, strconv.FormatInt(until, 10)
			sub, err := scanSubscription(stringRow(subDoc.String))
			if err != nil {
				return err
			}
			p.Subscription = sub
			p.Event = alerts.Event{ID: p.Delivery.EventID, Project: project, Type: p.Delivery.EventType, Payload: json.RawMessage(payload.String)}
			out = append(out, p)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim deliveries: %w", err)
	}
	return out, nil
}

// alertClaimScan bounds the due deliveries a claim with admit reads: it
// is fair among the earliest 1,000 due (docs/reliability.md).
const alertClaimScan = 1000

// dueDeliveries lists up to max due, unclaimed deliveries that admit takes
// among the first scan, earliest due first.
func dueDeliveries(ctx context.Context, tx *txn, now time.Time, scan, max int, admit func(project, subscription string) bool) ([]string, error) {
	ms := now.UnixMilli()
	rows, err := tx.QueryContext(ctx, `SELECT id, project, subscription FROM alert_deliveries
		WHERE status = 'PENDING' AND next_ms <= ? AND (claim_until_ms IS NULL OR claim_until_ms <= ?)
		ORDER BY next_ms LIMIT ?`, ms, ms, scan)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for len(ids) < max && rows.Next() {
		var id, project, sub string
		if err := rows.Scan(&id, &project, &sub); err != nil {
			return nil, err
		}
		if admit == nil || admit(project, sub) {
			ids = append(ids, id)
		}
	}
	return ids, rows.Err()
}

// stringRow scans one string column.
type stringRow string

func (r stringRow) Scan(dest ...any) error {
	*(dest[0].(*string)) = string(r)
	return nil
}

// RecordAttempt writes a delivery after an attempt and releases its claim.
func (s *Store) RecordAttempt(ctx context.Context, d alerts.Delivery) error {
	doc, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("pgstore: record delivery %s: %w", d.ID, err)
	}
	var next sql.NullInt64
	if d.NextAttemptAt != nil {
		next = sql.NullInt64{Int64: d.NextAttemptAt.UnixMilli(), Valid: true}
	}
	err = s.writeAudited(ctx, "record delivery "+d.ID, func(tx *txn) error {
		if d.Claim != "" {
			// A sender's result stands only while its claim does: a retry
			// (which clears the claim) or a later claim wins over it.
			claim, err := strconv.ParseInt(d.Claim, 10, 64)
			if err != nil {
				return fmt.Errorf("claim %q: %w", d.Claim, err)
			}
			_, err = tx.ExecContext(ctx, `UPDATE alert_deliveries SET status = ?, next_ms = ?, claim_until_ms = NULL, doc = ?
				WHERE project = ? AND id = ? AND claim_until_ms = ?`, d.Status, next, string(doc), d.Project, d.ID, claim)
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE alert_deliveries SET status = ?, next_ms = ?, claim_until_ms = NULL, doc = ?
			WHERE project = ? AND id = ?`, d.Status, next, string(doc), d.Project, d.ID)
		if err != nil {
			return err
		}
		return notFoundIfNone(res, "delivery", d.ID)
	})
	if err == nil && d.Status == alerts.DeliveryPending {
		s.wakeAlerts()
	}
	return err
}

// ReleaseAlertClaims frees every claimed delivery: at flowd's start, any
// claim is a dead process's, and its delivery may not have been made.
func (s *Store) ReleaseAlertClaims(ctx context.Context) (int, error) {
	var n int64
	err := s.write(ctx, "release alert claims", func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE alert_deliveries SET claim_until_ms = NULL WHERE claim_until_ms IS NOT NULL`)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: release alert claims: %w", err)
	}
	return int(n), nil
}

// Deliveries lists a subscription's latest deliveries, newest first.
func (s *Store) Deliveries(ctx context.Context, project, subscriptionID string, limit int) ([]alerts.Delivery, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT doc FROM alert_deliveries WHERE subscription = ? AND project = ?
		ORDER BY seq DESC LIMIT ?`, subscriptionID, project, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list deliveries: %w", err)
	}
	defer rows.Close()
	var ds []alerts.Delivery
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("pgstore: list deliveries: %w", err)
		}
		var d alerts.Delivery
		if err := json.Unmarshal([]byte(doc), &d); err != nil {
			return nil, fmt.Errorf("pgstore: decode delivery: %w", err)
		}
		d.Project = project
		ds = append(ds, d)
	}
	return ds, rows.Err()
}

// Delivery returns one delivery of the subscription.
func (s *Store) Delivery(ctx context.Context, project, subscriptionID, id string) (alerts.Delivery, error) {
	var doc string
	err := s.r.QueryRowContext(ctx, `SELECT doc FROM alert_deliveries WHERE project = ? AND subscription = ? AND id = ?`,
		project, subscriptionID, id).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return alerts.Delivery{}, automation.NotFound("delivery", id)
	} else if err != nil {
		return alerts.Delivery{}, fmt.Errorf("pgstore: get delivery %s: %w", id, err)
	}
	var d alerts.Delivery
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return alerts.Delivery{}, fmt.Errorf("pgstore: decode delivery %s: %w", id, err)
	}
	d.Project = project
	return d, nil
}

// outboxFlow writes, in a flow write's transaction tx, the event the
// Outbox decides for it: call it before the write, with next the flow
// after it (nil for a delete), so that the flow as stored is the one
// before. It is read only when the Outbox asks, so that a project without
// subscriptions pays nothing.
func (s *Store) outboxFlow(ctx context.Context, tx *txn, project, id string, next *automation.Flow) error {
	o := s.alerts.outbox.Load()
	if o == nil {
		return nil
	}
	subs, err := s.projectSubscriptions(ctx, project)
	if err != nil {
		return err
	}
	out, err := o.FlowChanged(project, id, next, subs, func() (*automation.Flow, error) {
		f, _, err := scanFlow(tx.QueryRowContext(ctx, `SELECT `+flowColumns+` FROM flows WHERE project = ? AND id = ?`, project, id))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		} else if err != nil {
			return nil, fmt.Errorf("flow before its event: %w", err)
		}
		return &f, nil
	})
	if err != nil {
		return err
	}
	return s.insertEvent(ctx, tx, out.Event, out.Deliveries)
}

// outboxConnection writes, in the transaction of a connection's status
// change, before it, the event the Outbox decides for it.
func (s *Store) outboxConnection(ctx context.Context, tx *txn, project, id string, to automation.ConnectionStatus) error {
	o := s.alerts.outbox.Load()
	if o == nil {
		return nil
	}
	subs, err := s.projectSubscriptions(ctx, project)
	if err != nil {
		return err
	}
	out, err := o.ConnectionChanged(project, to, subs, func() (automation.Connection, bool, error) {
		c, _, err := scanConnection(tx.QueryRowContext(ctx, `SELECT `+connectionColumns+` FROM connections WHERE project = ? AND id = ?`, project, id))
		if errors.Is(err, sql.ErrNoRows) {
			return automation.Connection{}, false, nil // the write answers not found
		} else if err != nil {
			return automation.Connection{}, false, fmt.Errorf("connection before its event: %w", err)
		}
		return c, true, nil
	})
	if err != nil {
		return err
	}
	return s.insertEvent(ctx, tx, out.Event, out.Deliveries)
}

// PurgeDeliveries removes up to limit deliveries that are no longer
// PENDING and whose event is older than before (alerts.Retention), and
// then the events no delivery needs.
func (s *Store) PurgeDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, "purge deliveries", func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM alert_deliveries WHERE seq IN (
			SELECT d.seq FROM alert_deliveries d JOIN alert_events e ON e.id = d.event
			WHERE d.status != 'PENDING' AND e.created_ms < ? LIMIT ?)`, before.UnixMilli(), limit)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM alert_events WHERE created_ms < ?
			AND NOT EXISTS (SELECT 1 FROM alert_deliveries d WHERE d.event = alert_events.id)`, before.UnixMilli())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: purge deliveries: %w", err)
	}
	return int(n), nil
}
