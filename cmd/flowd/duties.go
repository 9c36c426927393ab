package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// dutyLeases keeps the leases of cluster duties (pgstore.Store).
type dutyLeases interface {
	HoldDuty(ctx context.Context, name, holder string, now time.Time, lease time.Duration) (bool, error)
	ReleaseDuty(ctx context.Context, name, holder string) error
}

// The cluster duties of flowd nodes on one database: each is done by the
// one node holding its lease, so that it happens once per tick across
// nodes (docs/reliability.md, "PostgreSQL nodes").
const (
	dutyCron   = "cron"   // SCHEDULE firings and POLL polls
	dutyAlerts = "alerts" // the alert sender: deliveries and their retries
	dutySweep  = "sweep"  // retention: expired runs and alert deliveries
)

// nodeName names this node in the duty leases and its logs: the host, the
// process and a random part, so that a restarted process is a new holder
// and never renews its dead predecessor's lease by name.
func nodeName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// duty is one cluster duty as this node sees it. keep renews its lease
// every quarter of the lease; Held answers from the last renewal, so that
// the run path never waits on the database to ask.
type duty struct {
	name, node string
	leases     dutyLeases
	lease      time.Duration
	now        func() time.Time
	log        *slog.Logger

	// until is when this node stops acting as holder (UnixNano), 0 when it
	// does not hold the duty: one renewal period before the lease runs out
	// in the database, so that a node that cannot renew stops before
	// another may take over.
	until atomic.Int64

	mu      sync.Mutex
	changed chan struct{} // closed, and replaced, whenever Held may have changed
}

func newDuty(name, node string, leases dutyLeases, lease time.Duration, log *slog.Logger) *duty {
	return &duty{name: name, node: node, leases: leases, lease: lease, now: time.Now, log: log, changed: make(chan struct{})}
}

// renewEvery is how often the holder renews, and the others ask.
func (d *duty) renewEvery() time.Duration { return d.lease / 4 }

// Held reports whether this node holds the duty now.
func (d *duty) Held() bool { return d.now().UnixNano() < d.until.Load() }

func (d *duty) changes() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

func (d *duty) signal() {
	d.mu.Lock()
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

// keep takes or renews the lease every renewal period until ctx ends, then
// gives the duty up, so that another node takes it at its next try
// rather than when the lease runs out.
func (d *duty) keep(ctx context.Context) {
	t := time.NewTicker(d.renewEvery())
	defer t.Stop()
	held := false
	for {
		at := d.now()
		ok, err := d.leases.HoldDuty(ctx, d.name, d.node, at, d.lease)
		switch {
		case err != nil:
			// The lease may still be ours: until stands, and runs out by
			// itself if the database stays away.
			if ctx.Err() == nil {
				d.log.Warn("renew cluster duty", "duty", d.name, "err", err)
			}
		case ok:
			d.until.Store(at.Add(d.lease - d.renewEvery()).UnixNano())
		default:
			d.until.Store(0)
		}
		if now := d.Held(); now != held {
			held = now
			if held {
				d.log.Info("cluster duty taken", "duty", d.name, "node", d.node)
			} else {
				d.log.Info("cluster duty lost", "duty", d.name, "node", d.node)
			}
			d.signal()
		}
		select {
		case <-ctx.Done():
			if held {
				d.until.Store(0)
				d.signal()
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				if err := d.leases.ReleaseDuty(rctx, d.name, d.node); err != nil {
					d.log.Warn("release cluster duty", "duty", d.name, "err", err)
				}
				cancel()
			}
			return
		case <-t.C:
		}
	}
}

// while runs fn whenever this node holds the duty, with a context that
// ends when it loses it (or ctx ends), until ctx ends. fn runs until its
// context ends.
func (d *duty) while(ctx context.Context, fn func(context.Context)) {
	for ctx.Err() == nil {
		ch := d.changes()
		if !d.Held() {
			select {
			case <-ctx.Done():
			case <-ch:
			}
			continue
		}
		hctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); fn(hctx) }()
	watch:
		for {
			select {
			case <-ctx.Done():
				break watch
			case <-done:
				// fn gave up by itself: wait for the next change, not
				// spin.
				select {
				case <-ctx.Done():
				case <-ch:
				}
				break watch
			case <-ch:
				if !d.Held() {
					break watch
				}
				ch = d.changes()
			}
		}
		cancel()
		<-done
	}
}
