package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimit bounds the management requests of each project: PerSecond on
// average, in bursts of up to Burst. The zero value sets no limit.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// APIOption configures NewAPI.
type APIOption func(*API)

// WithRateLimit limits each project's management requests in this process,
// answering 429 with Retry-After past the limit. (On Lambda, API Gateway's
// stage throttling does this across instances.)
func WithRateLimit(rl RateLimit) APIOption {
	return func(a *API) {
		if rl.PerSecond > 0 && rl.Burst > 0 {
			a.limits = &limiter{rl: rl, buckets: map[string]*bucket{}}
		}
	}
}

// limiter keeps one token bucket per project.
type limiter struct {
	rl      RateLimit
	mu      sync.Mutex
	buckets map[string]*bucket
	calls   int
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// idleBucket is how long a project's bucket outlives its last request; a
// bucket idle that long is full again anyway.
const idleBucket = 10 * time.Minute

// allow takes a token for project, or says how long until one is there.
func (l *limiter) allow(project string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.calls%1024 == 0 {
		for p, b := range l.buckets {
			if now.Sub(b.seen) > idleBucket {
				delete(l.buckets, p)
			}
		}
	}
	b, ok := l.buckets[project]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(l.rl.PerSecond), l.rl.Burst)}
		l.buckets[project] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// limit answers 429 to a project over its rate; it runs after
// authentication, so that the bucket is the key's project's.
func (a *API) limit(next http.Handler) http.Handler {
	if a.limits == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, wait := a.limits.allow(infoOf(r.Context()).project.ID, time.Now())
		if !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			writeError(w, r, http.StatusTooManyRequests, "RATE_LIMITED",
				"too many requests for this project; retry after the number of seconds in Retry-After")
			return
		}
		next.ServeHTTP(w, r)
	})
}
