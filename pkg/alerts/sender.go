package alerts

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// NewClient is the client a Service sends with, over t (the HTTP step's
// SSRF-guarded transport): the connection is bounded by DialTimeout,
// apart from the attempt's AttemptTimeout, and a redirect is not followed
// (the receiver is the subscription's URL).
func NewClient(t *http.Transport) *http.Client {
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, DialTimeout)
		defer cancel()
		return dial(ctx, network, addr)
	}
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// senders is what a Service has in flight, by project and subscription:
// a claim takes only what its shares admit (admit), so a claimed delivery
// is sent at once and never waits in memory while its lease runs out.
type senders struct {
	claimMu sync.Mutex // one claim at a time: the free senders are counted before it

	mu       sync.Mutex
	inFlight int
	projects map[string]int
	subs     map[string]int
	// owner is each subscription's project as claims showed it, for a
	// store that cannot tell a delivery's project before its claim
	// (DynamoDB's keys-only index). A subscription never changes project.
	owner map[string]string

	wg    sync.WaitGroup
	freed chan struct{} // an attempt ended (coalesced)
}

// maxOwners bounds the subscriptions whose project a Service remembers;
// past it the memory starts over (a project of a forgotten subscription
// may then go past its share by the deliveries of one claim).
const maxOwners = 10_000

func newSenders() *senders {
	return &senders{projects: map[string]int{}, subs: map[string]int{}, owner: map[string]string{}, freed: make(chan struct{}, 1)}
}

func (s *senders) take(p Pending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight++
	s.projects[p.Delivery.Project]++
	s.subs[p.Delivery.SubscriptionID]++
	if len(s.owner) >= maxOwners {
		clear(s.owner)
	}
	s.owner[p.Delivery.SubscriptionID] = p.Delivery.Project
}

func (s *senders) done(p Pending) {
	s.mu.Lock()
	s.inFlight--
	if s.projects[p.Delivery.Project]--; s.projects[p.Delivery.Project] <= 0 {
		delete(s.projects, p.Delivery.Project)
	}
	if s.subs[p.Delivery.SubscriptionID]--; s.subs[p.Delivery.SubscriptionID] <= 0 {
		delete(s.subs, p.Delivery.SubscriptionID)
	}
	s.mu.Unlock()
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// Round is what one Dispatch did.
type Round struct {
	// Claimed is how many deliveries it claimed and started.
	Claimed int
	// More reports that due deliveries may be left that a free sender
	// could take: the senders were all busy, the claim was full, or it
	// passed over deliveries of a project or subscription at its share.
	// Claim again when an attempt ends (Freed).
	More bool
}

// Dispatch claims due deliveries for the senders free now (at most max),
// within the shares: a project holds at most PerProjectSenders of the
// Senders and a subscription at most PerSubscription, and the claim passes
// over the deliveries of those at their share for the others'. It starts
// each attempt and returns without waiting for any: one project's
// receivers that hang hold their share for AttemptTimeout, never the
// deliveries claimed with them or after them.
func (s *Service) Dispatch(ctx context.Context, max int) (Round, error) {
	sd := s.senders
	sd.claimMu.Lock()
	defer sd.claimMu.Unlock()
	sd.mu.Lock()
	ask := min(max, Senders-sd.inFlight)
	sd.mu.Unlock()
	if ask <= 0 {
		return Round{More: true}, nil
	}
	takenP, takenS := map[string]int{}, map[string]int{}
	passed := false
	admit := func(project, sub string) bool {
		sd.mu.Lock()
		defer sd.mu.Unlock()
		if project == "" {
			project = sd.owner[sub]
		}
		if sd.subs[sub]+takenS[sub] >= PerSubscription ||
			(project != "" && sd.projects[project]+takenP[project] >= PerProjectSenders) {
			passed = true
			return false
		}
		takenS[sub]++
		if project != "" {
			takenP[project]++
		}
		return true
	}
	due, err := s.store.ClaimDeliveries(ctx, s.clock(), ClaimLease, ask, admit)
	for _, p := range due {
		sd.take(p)
		sd.wg.Go(func() {
			defer sd.done(p)
			s.attempt(ctx, p)
		})
	}
	if err != nil {
		return Round{Claimed: len(due)}, fmt.Errorf("alerts: claim deliveries: %w", err)
	}
	return Round{Claimed: len(due), More: len(due) == ask || passed}, nil
}

// Freed is signalled (coalesced) when an attempt Dispatch started ends.
func (s *Service) Freed() <-chan struct{} { return s.senders.freed }

// Wait returns when every attempt Dispatch started has been recorded.
func (s *Service) Wait() { s.senders.wg.Wait() }

// Run sends due deliveries until ctx ends, then waits for the attempts
// under way: it claims at once when woken (a new event was written), when
// an attempt ends while due deliveries were left (Round.More), and every
// poll for retries that came due.
func (s *Service) Run(ctx context.Context, wake <-chan struct{}, poll time.Duration) {
	defer s.Wait()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		r, err := s.Dispatch(ctx, Senders)
		if err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "deliver alerts", "err", err)
		}
		var freed <-chan struct{}
		if r.More {
			freed = s.Freed()
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-freed:
		case <-tick.C:
		}
	}
}

// Drain sends what is due now, up to max deliveries, claiming again as
// attempts end, and returns when each attempt it started is recorded: a
// Lambda invocation (whose instance is frozen once it returns). It
// returns how many it claimed.
func (s *Service) Drain(ctx context.Context, max int) (int, error) {
	defer s.Wait()
	total := 0
	for total < max && ctx.Err() == nil {
		r, err := s.Dispatch(ctx, max-total)
		total += r.Claimed
		if err != nil {
			return total, err
		}
		if !r.More {
			break
		}
		select {
		case <-ctx.Done():
		case <-s.Freed():
		}
	}
	return total, nil
}

// attempt sends p, once its project's outboundPerMinute quota admits it
// (an alert is an outbound request like an HTTP step's, counted in the
// same bucket); held back more than QuotaWait, it is put off by
// QuotaDelay instead, not lost and not counted as an attempt.
func (s *Service) attempt(ctx context.Context, p Pending) {
	if s.outbound != nil && s.sends(p) {
		qctx, cancel := context.WithTimeout(ctx, s.quotaWait)
		err := s.outbound.AdmitOutbound(qctx, p.Delivery.Project)
		cancel()
		if ctx.Err() != nil {
			return // shutting down: the claim's lease runs out and it is sent again
		}
		if err != nil {
			reason := "held back by the project's outboundPerMinute quota"
			if qctx.Err() == nil {
				reason = "reading the project's outboundPerMinute quota failed: " + err.Error()
			}
			d := PutOff(p.Delivery, reason, s.clock().UTC().Truncate(time.Millisecond), QuotaDelay)
			if err := s.store.RecordAttempt(ctx, d); err != nil {
				s.log.ErrorContext(ctx, "alert delivery not put off", "delivery", d.ID, "err", err)
			}
			return
		}
	}
	if err := s.deliver(ctx, p); err != nil {
		s.log.ErrorContext(ctx, "alert delivery not recorded", "delivery", p.Delivery.ID, "err", err)
	}
}

// sends reports whether an attempt at p makes a request: a disabled
// subscription's deliveries fail unsent, except pings.
func (s *Service) sends(p Pending) bool {
	return p.Subscription.Status == StatusActive || p.Event.Type == EventPing
}

// PutOff is a delivery that was not attempted now, due again after wait:
// still PENDING, its attempts and history unchanged, the reason in
// lastError.
func PutOff(d Delivery, reason string, now time.Time, wait time.Duration) Delivery {
	next := now.Add(wait)
	d.Status, d.NextAttemptAt, d.LastError, d.Updated = DeliveryPending, &next, reason, now
	return d
}
