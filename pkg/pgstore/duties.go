package pgstore

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// DutyLease is how long a node holds a cluster duty (cron, POLL, the alert
// sender and sweep timers) after it last renewed it; a holder renews every
// DutyRenew. A node that dies leaves the duty to another within DutyLease
// plus one renewal period: 20 s + 5 s, inside the 30 s promised in
// docs/reliability.md (TestDutyTakenOverWhenHolderStops).
const (
	DutyLease = 20 * time.Second
	DutyRenew = 5 * time.Second
)

// HoldDuty takes or renews the lease of the named duty for holder until
// now+lease, and reports whether holder has it: it does when nobody held
// it, when holder held it, or when the holder's lease ran out by now. Of
// nodes asking at once exactly one gets true (one conditional upsert).
func (s *Store) HoldDuty(ctx context.Context, name, holder string, now time.Time, lease time.Duration) (bool, error) {
	var got string
	err := s.w.QueryRowContext(ctx,
		`INSERT INTO duty_leases (name, holder, lease_until) VALUES (?1, ?2, ?3)
		 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until
		 WHERE duty_leases.holder = excluded.holder OR duty_leases.lease_until <= ?4
		 RETURNING holder`, name, holder, now.Add(lease).UnixMilli(), now.UnixMilli()).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, wrapWriteErr("hold duty "+name, "", err)
	}
	return got == holder, nil
}

// ReleaseDuty gives up holder's lease of the duty at once (a node shutting
// down), so that another node takes it at its next renewal.
func (s *Store) ReleaseDuty(ctx context.Context, name, holder string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM duty_leases WHERE name = ? AND holder = ?`, name, holder); err != nil {
		return wrapWriteErr("release duty "+name, "", err)
	}
	return nil
}

// ErrWrongSecretKey is CheckSecretKey's answer to a key other than the
// one the database's secrets were sealed with.
var ErrWrongSecretKey = errors.New("FLOWD_SECRET_KEY is not the key this database's secrets are sealed with: every node must have the same FLOWD_SECRET_KEY")

// CheckSecretKey compares the secret key's check value with the one the
// first node stored, storing it when the database has none: a node
// started with another key refuses to start (ErrWrongSecretKey) instead of
// sealing secrets no other node can open. The check value is an HMAC of
// a fixed text, which does not reveal the key.
func (s *Store) CheckSecretKey(ctx context.Context, key []byte) error {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("flowd secret key check v1"))
	check := base64.StdEncoding.EncodeToString(m.Sum(nil))
	var stored string
	err := s.w.QueryRowContext(ctx,
		`INSERT INTO cluster_settings (name, value) VALUES ('secret_key_check', ?)
		 ON CONFLICT (name) DO UPDATE SET value = cluster_settings.value RETURNING value`, check).Scan(&stored)
	if err != nil {
		return fmt.Errorf("pgstore: check secret key: %w", err)
	}
	if !hmac.Equal([]byte(stored), []byte(check)) {
		return ErrWrongSecretKey
	}
	return nil
}
