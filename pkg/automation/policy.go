package automation

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// RunPolicy bounds runs. It is the one place that knows the defaults: a
// zero field means the default everywhere (Service, worker pool, Lambda
// runner), and flowd and the Lambdas read it the same way (ParseRunPolicy).
type RunPolicy struct {
	MaxAttempts int           // attempts before a transient failure is final; default 5
	Timeout     time.Duration // one attempt; default 5 minutes
	Retention   time.Duration // how long run records are kept; default 30 days
	BaseBackoff time.Duration // delay before the second attempt; default 2 s, doubling
	MaxBackoff  time.Duration // longest delay between attempts; default 5 minutes
	// MaxCrashes is how many attempts may be cut short by the death of
	// their process (claimed, never released or finished) before the run
	// is finished FAILED instead of executed again; default 3. A flow that
	// kills its executor then stops doing so after MaxCrashes restarts.
	MaxCrashes int
}

// Defaults of RunPolicy.
const (
	DefaultRunAttempts  = 5
	DefaultRunTimeout   = 5 * time.Minute
	DefaultRunRetention = 30 * 24 * time.Hour
	DefaultBaseBackoff  = 2 * time.Second
	DefaultMaxBackoff   = 5 * time.Minute
	DefaultMaxCrashes   = 3
)

// WithDefaults returns p with every zero (or negative) field set to its
// default.
func (p RunPolicy) WithDefaults() RunPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultRunAttempts
	}
	if p.Timeout <= 0 {
		p.Timeout = DefaultRunTimeout
	}
	if p.Retention <= 0 {
		p.Retention = DefaultRunRetention
	}
	if p.BaseBackoff <= 0 {
		p.BaseBackoff = DefaultBaseBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = DefaultMaxBackoff
	}
	if p.MaxCrashes <= 0 {
		p.MaxCrashes = DefaultMaxCrashes
	}
	return p
}

// Lease is how long a claim holds a run: longer than an attempt may take,
// so a live attempt is never taken over, short enough that the run of a
// crashed process is taken up again soon. Queues lease their entries at
// least as long.
func (p RunPolicy) Lease() time.Duration {
	t := p.WithDefaults().Timeout
	return t + min(t/2, 30*time.Second)
}

// Backoff is the delay before the attempt after attempt n (1 for the
// first): exponential from BaseBackoff up to MaxBackoff, with full jitter in
// its upper half, so that retries of many runs do not arrive in step.
func (p RunPolicy) Backoff(n int) time.Duration {
	p = p.WithDefaults()
	d := p.BaseBackoff
	for i := 1; i < n && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// ParseRunPolicy reads a RunPolicy from settings named with prefix:
// <prefix>RUN_ATTEMPTS (1 to 100), <prefix>RUN_TIMEOUT,
// <prefix>RUN_RETENTION, <prefix>RUN_BACKOFF, <prefix>RUN_MAX_BACKOFF
// (durations such as 30s) and <prefix>RUN_MAX_CRASHES (1 to 100). flowd
// passes "FLOWD_", the Lambdas "". An unset setting stays zero: the
// default.
func ParseRunPolicy(getenv func(string) string, prefix string) (RunPolicy, error) {
	var p RunPolicy
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{
		{"RUN_TIMEOUT", &p.Timeout}, {"RUN_RETENTION", &p.Retention},
		{"RUN_BACKOFF", &p.BaseBackoff}, {"RUN_MAX_BACKOFF", &p.MaxBackoff},
	} {
		v := getenv(prefix + d.name)
		if v == "" {
			continue
		}
		t, err := time.ParseDuration(v)
		if err != nil || t <= 0 {
			return p, fmt.Errorf("%s%s=%q: want a positive duration such as 30s", prefix, d.name, v)
		}
		*d.dst = t
	}
	for _, n := range []struct {
		name string
		dst  *int
	}{{"RUN_ATTEMPTS", &p.MaxAttempts}, {"RUN_MAX_CRASHES", &p.MaxCrashes}} {
		v := getenv(prefix + n.name)
		if v == "" {
			continue
		}
		i, err := strconv.Atoi(v)
		if err != nil || i < 1 || i > 100 {
			return p, fmt.Errorf("%s%s=%q: want an integer from 1 to 100", prefix, n.name, v)
		}
		*n.dst = i
	}
	return p, nil
}
