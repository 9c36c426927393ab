package httpapi

import (
	"context"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"

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

// maxBodyWait is how long a delivery waits for room in the budget before
// it is answered 503: long enough to ride out a burst, short enough that
// waiting senders do not pile up connections.
const maxBodyWait = time.Second

// BodyBudget is the process-wide budget of webhook bodies in flight, in
// wire bytes: a delivery reserves its declared length (or the body limit,
// when it declares none) before a byte is read, and gives it back when its
// request ends. Past the budget a receiver answers 503 with Retry-After,
// so that concurrent large bodies slow senders down instead of running the
// process out of memory.
// Both receivers of a process share one (HookConfig.Bodies).
//
// Small bodies (up to smallBody) have a share of their own, a quarter of
// the budget on top of it (at least 4 MiB), so that ordinary deliveries
// never wait behind large ones.
type BodyBudget struct {
	large, small         *semaphore.Weighted
	largeSize, smallSize int64
}

// smallBody is the largest body counted in the small bodies' share.
const smallBody = 256 << 10

// NewBodyBudget is a budget of size wire bytes of webhook bodies in
// flight, at least maxBody, so that one body of the largest size always
// fits, and a share for small bodies beside it.
func NewBodyBudget(size, maxBody int64) *BodyBudget {
	large := max(size, maxBody)
	small := max(size/4, 4<<20)
	return &BodyBudget{large: semaphore.NewWeighted(large), largeSize: large,
		small: semaphore.NewWeighted(small), smallSize: small}
}

// Size is what the budget admits at once, small bodies' share included.
func (b *BodyBudget) Size() int64 { return b.largeSize + b.smallSize }

// reserve takes room for r's body, or fails with ErrUnavailable after
// maxBodyWait. The release func is never nil.
func (b *BodyBudget) reserve(ctx context.Context, r *http.Request, maxBody int64) (func(), error) {
	n := r.ContentLength
	if n > maxBody {
		return func() {}, nil // refused unread (readBody)
	}
	if n < 0 {
		n = maxBody // chunked: it may be as large as the limit lets it
	}
	if n <= 0 {
		return func() {}, nil
	}
	sem := b.large
	if n <= smallBody {
		sem = b.small
	}
	n = min(n, b.largeSize)
	if !sem.TryAcquire(n) {
		wctx, cancel := context.WithTimeout(ctx, maxBodyWait)
		err := sem.Acquire(wctx, n)
		cancel()
		if err != nil {
			return func() {}, automation.Unavailable("BODY_BUDGET",
				"the server is receiving too many large webhook bodies at once; send this one again in a few seconds")
		}
	}
	return func() { sem.Release(n) }, nil
}
