package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"flowservice/pkg/automation"
)

// BodyCost is how many bytes of memory one wire byte of a webhook body
// may cost before its run is stored: the body read, its parsed form (a
// multipart file as base64), the run's document and the store's copy.
// Measured at about 17 for a 10 MiB multipart body and 10 for JSON
// (docs/reliability.md, "Webhook bodies"); budgets divide memory by it.
const BodyCost = 16

// DefaultBodiesInFlight is the size of the budget a receiver makes for
// itself when HookConfig.Bodies is nil.
const DefaultBodiesInFlight = 64 << 20

// Defaults of the minimum receive rate (WithReceiveRate): a body must
// arrive at DefaultMinBodyRate on average once DefaultBodyGrace has
// passed. A phone on a poor link sends tens of KiB a second; a sender
// slower than this holds its connection for no delivery.
const (
	DefaultMinBodyRate = 4 << 10
	DefaultBodyGrace   = 10 * time.Second
)

// maxBodyWait is how long a delivery waits for room in the budget before
// it is answered 503: long enough to ride out a burst, short enough that
// waiting senders do not pile up connections.
const maxBodyWait = time.Second

// smallBody is the largest body counted in the small bodies' share.
const smallBody = 256 << 10

// BodyBudget is the process-wide budget of webhook bodies in flight, in
// wire bytes. A body is charged as its bytes arrive, never for what it
// declares: a sender that declares 256 KiB and sends one byte holds one
// byte. Its charge is given back when its request ends (its run is stored
// or answered by then). Past the budget a receiver answers 503
// BODY_BUDGET with Retry-After, so that concurrent large bodies slow
// senders down instead of running the process out of memory. Both
// receivers of a process share one (HookConfig.Bodies).
//
// Three bounds make the budget fair:
//   - bodies over smallBody (declared, or once they pass it) share the
//     large part; the rest, a quarter of the budget on top of it (at least
//     4 MiB), is for small bodies, so that ordinary deliveries never wait
//     behind large ones;
//   - one project holds at most its share (a quarter of the budget, at
//     least one body of the largest size, at most the large part), so that
//     others always find room;
//   - a body must arrive at a minimum rate after a grace period
//     (WithReceiveRate), or it is cut with 408 BODY_TOO_SLOW: a slow sender
//     pays alone, and a connection held open for nothing ends.
type BodyBudget struct {
	timers  Timers
	minRate int64
	grace   time.Duration

	mu                     sync.Mutex
	size, largeSize, share int64
	used, largeUsed        int64
	projects               map[string]int64
	// changed is closed, and replaced, whenever room is given back.
	changed chan struct{}
	// holding is set while a delivery that holds bytes waits for more:
	// another one that would wait too is refused at once, so that bodies
	// half received never all wait on each other until maxBodyWait.
	holding bool
}

// Timers is the clock of a BodyBudget: its waits for room and its receive
// deadlines. Tests inject one they advance.
type Timers interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed; stop
	// cancels it.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type wallTimers struct{}

func (wallTimers) Now() time.Time { return time.Now() }
func (wallTimers) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// BodyOption configures a BodyBudget.
type BodyOption func(*BodyBudget)

// WithTimers sets the budget's clock; default the wall clock.
func WithTimers(t Timers) BodyOption { return func(b *BodyBudget) { b.timers = t } }

// WithReceiveRate sets the minimum receive rate: a body that has not
// arrived whole by grace + received/minRate after its first read is cut
// (408). minRate <= 0 turns the check off. Default DefaultMinBodyRate
// after DefaultBodyGrace.
func WithReceiveRate(minRate int64, grace time.Duration) BodyOption {
	return func(b *BodyBudget) { b.minRate, b.grace = minRate, grace }
}

// NewBodyBudget is a budget of size wire bytes of webhook bodies in
// flight, at least maxBody, so that one body of the largest size always
// fits, and a share for small bodies beside it.
func NewBodyBudget(size, maxBody int64, opts ...BodyOption) *BodyBudget {
	large := max(size, maxBody)
	small := max(size/4, 4<<20)
	b := &BodyBudget{timers: wallTimers{}, minRate: DefaultMinBodyRate, grace: DefaultBodyGrace,
		size: large + small, largeSize: large, share: min(max((large+small)/4, maxBody), large),
		projects: map[string]int64{}, changed: make(chan struct{})}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Size is what the budget admits at once, small bodies' share included.
func (b *BodyBudget) Size() int64 { return b.size }

// ProjectShare is the most one project's bodies hold at once.
func (b *BodyBudget) ProjectShare() int64 { return b.share }

// inUse is what project holds now ("" for all projects).
func (b *BodyBudget) inUse(project string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if project == "" {
		return b.used
	}
	return b.projects[project]
}

// errBodyTooSlow ends the read of a body cut for its rate.
var errBodyTooSlow = errors.New("webhook body arrived too slowly")

// bodyCharge is one request's account with the budget: what it holds and,
// while its body is read, its receive deadline.
type bodyCharge struct {
	b        *BodyBudget
	project  string
	declared int64
	n        int64 // bytes charged
	large    bool  // counted in largeUsed

	// Guarded by b.mu.
	start    time.Time
	received int64
	watching bool // the body is being read and its rate checked
	cut      bool
	stop     func() bool
	onCut    func()
}

// newCharge is an empty account for one request.
func (b *BodyBudget) newCharge() *bodyCharge { return &bodyCharge{b: b} }

// body wraps a request body of project's delivery so that its bytes are
// charged as they arrive and its rate is watched; cut is called (once)
// when the body is too slow, to end a read that is waiting for bytes.
func (c *bodyCharge) body(ctx context.Context, project string, declared int64, body io.ReadCloser, cut func()) io.ReadCloser {
	b := c.b
	b.mu.Lock()
	c.project, c.declared, c.onCut = project, declared, cut
	c.start, c.watching = b.timers.Now(), b.minRate > 0
	if c.watching {
		c.stop = b.timers.AfterFunc(b.grace, c.check)
	}
	b.mu.Unlock()
	return &chargedBody{ReadCloser: body, c: c, ctx: ctx}
}

// deadline is when the body must have arrived whole, given what has: the
// grace, then 1 s for each minRate bytes received. b.mu held.
func (c *bodyCharge) deadline() time.Time {
	return c.start.Add(c.b.grace + time.Duration(float64(c.received)/float64(c.b.minRate)*float64(time.Second)))
}

// check runs at the receive deadline: a body that has received enough
// since is given a later one; otherwise it is cut.
func (c *bodyCharge) check() {
	b := c.b
	b.mu.Lock()
	if !c.watching || c.cut {
		b.mu.Unlock()
		return
	}
	now, dl := b.timers.Now(), c.deadline()
	if now.Before(dl) {
		c.stop = b.timers.AfterFunc(dl.Sub(now), c.check)
		b.mu.Unlock()
		return
	}
	c.cut = true
	cut := c.onCut
	b.mu.Unlock()
	if cut != nil {
		cut()
	}
}

// arrived notes n bytes read and reports whether the body was cut. A
// body read at a rate check ends its watch.
func (c *bodyCharge) arrived(n int, eof bool) (cut bool) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	c.received += int64(n)
	if c.watching && !c.cut && !eof && !b.timers.Now().Before(c.deadline()) {
		// Past the deadline while the timer has not fired yet.
		c.cut = true
	}
	if eof || c.cut {
		c.endWatch()
	}
	return c.cut
}

// endWatch stops the rate check. b.mu held.
func (c *bodyCharge) endWatch() {
	c.watching = false
	if c.stop != nil {
		c.stop()
		c.stop = nil
	}
}

// take charges k more bytes to c, waiting up to maxBodyWait for room; it
// fails with ErrUnavailable (503 BODY_BUDGET).
func (c *bodyCharge) take(ctx context.Context, k int64) error {
	b := c.b
	var expired chan struct{}
	var stop func() bool
	waiting := false // c is the holding waiter
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		large := c.large || c.declared > smallBody || c.n+k > smallBody
		toLarge := k
		if large && !c.large {
			toLarge = c.n + k
		}
		if b.used+k <= b.size && b.projects[c.project]+k <= b.share && (!large || b.largeUsed+toLarge <= b.largeSize) {
			b.used += k
			b.projects[c.project] += k
			c.n += k
			if large {
				b.largeUsed += toLarge
				c.large = true
			}
			if waiting {
				b.holding = false
			}
			return nil
		}
		if c.n > 0 && !waiting {
			if b.holding {
				return budgetFull()
			}
			b.holding, waiting = true, true
		}
		if expired == nil {
			expired = make(chan struct{})
			stop = b.timers.AfterFunc(maxBodyWait, func() { close(expired) })
		}
		changed := b.changed
		b.mu.Unlock()
		var err error
		select {
		case <-changed:
		case <-expired:
			err = budgetFull()
		case <-ctx.Done():
			err = budgetFull()
		}
		b.mu.Lock()
		if err != nil {
			if waiting {
				b.holding = false
			}
			return err
		}
	}
}

// release gives back all c holds and ends its rate check; the request is
// over.
func (c *bodyCharge) release() {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	c.endWatch()
	c.onCut = nil
	if c.n == 0 {
		return
	}
	b.used -= c.n
	if b.projects[c.project] -= c.n; b.projects[c.project] <= 0 {
		delete(b.projects, c.project)
	}
	if c.large {
		b.largeUsed -= c.n
	}
	c.n = 0
	close(b.changed)
	b.changed = make(chan struct{})
}

func budgetFull() error {
	return automation.Unavailable("BODY_BUDGET",
		"the server is receiving too many large webhook bodies at once; send this one again in a few seconds")
}

// chargedBody is a request body whose bytes are charged as they arrive.
type chargedBody struct {
	io.ReadCloser
	c   *bodyCharge
	ctx context.Context
}

func (r *chargedBody) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if r.c.arrived(n, errors.Is(err, io.EOF)) {
		return 0, errBodyTooSlow
	}
	if n > 0 {
		if cerr := r.c.take(r.ctx, int64(n)); cerr != nil {
			return 0, cerr
		}
	}
	return n, err
}

// tooSlow is the answer to a body cut for its rate.
func (b *BodyBudget) tooSlow() error {
	return &automation.Error{Kind: errTooSlow, Code: "BODY_TOO_SLOW",
		Message: fmt.Sprintf("the request body arrived slower than %d bytes a second after the first %s; send it again", b.minRate, b.grace)}
}

// cutRead makes a read of w's connection that waits for bytes end now.
// Where the writer cannot (a Lambda's proxy adapter holds the whole body
// already), the next read ends the body instead.
func cutRead(w http.ResponseWriter) func() {
	rc := http.NewResponseController(w)
	return func() { _ = rc.SetReadDeadline(time.Unix(1, 0)) }
}
