package automation

import (
	"context"
	"sync"
	"time"

	xrate "golang.org/x/time/rate"
)

// OutboundGate holds a project's outbound HTTP step requests (retries
// included) to its outboundPerMinute quota: past it a request waits, it
// does not fail. ProjectService implements it (and so Service); the engine
// asks it before every request it sends.
type OutboundGate interface {
	// AdmitOutbound returns when the project may send one more request, or
	// ctx's error if ctx ends first.
	AdmitOutbound(ctx context.Context, project string) error
}

var _ OutboundGate = (*Service)(nil)

// AdmitOutbound waits until the project may send one more HTTP step
// request under its outboundPerMinute quota, counted for the project
// across instances (docs/reliability.md): with RateBuckets (Lambda) one
// conditional write per admitted request, none for an unlimited plan;
// else this process's bucket (flowd). In a process, requests wait in the
// order they asked, so one run's loop cannot take the project's minute
// from its other runs beyond the requests it has in flight (a FOR_EACH's
// concurrency, at most 10).
func (s *ProjectService) AdmitOutbound(ctx context.Context, project string) error {
	pq, err := s.quotas.get(ctx, s.store, project, s.clock())
	if err != nil {
		return err
	}
	if pq.limits.OutboundPerMinute == nil {
		return nil
	}
	per := *pq.limits.OutboundPerMinute
	if s.buckets == nil || per <= 0 {
		return s.outbound.wait(ctx, project, per)
	}
	for {
		wait, err := s.buckets.Take(ctx, "outbound#"+project, float64(per)/60, max(1, per/60), s.clock())
		if err != nil {
			return wrap("take a request from the project's outboundPerMinute", err)
		}
		if wait == 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// outboundGates are the projects' outbound buckets: at most perMinute
// requests a minute, refilled evenly, with a burst of one second's worth
// (so that any minute sees at most perMinute + perMinute/60). One small
// entry per project that sent a request; projects are few.
type outboundGates struct {
	mu sync.Mutex
	m  map[string]*outboundGate
}

type outboundGate struct {
	perMinute int64
	lim       *xrate.Limiter
}

func (g *outboundGates) limiter(project string, perMinute int64) *xrate.Limiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	if og := g.m[project]; og != nil && og.perMinute == perMinute {
		return og.lim
	}
	if g.m == nil {
		g.m = map[string]*outboundGate{}
	}
	lim := xrate.NewLimiter(xrate.Limit(float64(perMinute)/60), int(max(1, perMinute/60)))
	g.m[project] = &outboundGate{perMinute: perMinute, lim: lim}
	return lim
}

// wait takes one request from the project's bucket, waiting for it; a
// limit of 0 admits nothing, so the request waits until ctx ends.
func (g *outboundGates) wait(ctx context.Context, project string, perMinute int64) error {
	if perMinute <= 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	r := g.limiter(project, perMinute).Reserve()
	d := r.Delay()
	if d == 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.Cancel() // give the slot back to the requests behind it
		return ctx.Err()
	}
}
