package automation

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// UsageStore measures what a project keeps, for its storedBytes quota.
type UsageStore interface {
	// StoredBytes is about how many bytes the project's runs, webhook
	// samples, flow state and kept flow versions take in the store. It may read much (a sum
	// over the project's runs), so the Service asks it at most every
	// StorageTTL per project and never on a delivery's path; a store may
	// leave out runs that have not finished yet.
	StoredBytes(ctx context.Context, project string) (int64, error)
	// AddAITokens adds n model tokens to the project's count of day (AIDay)
	// and returns the count after the add, atomically: of concurrent adds
	// none is lost (aitokens.go).
	AddAITokens(ctx context.Context, project, day string, n int64) (int64, error)
	// AITokens is the project's count of day: 0 when nothing was added.
	AITokens(ctx context.Context, project, day string) (int64, error)
}

// StorageTTL is how long a project's measured storedBytes usage stands
// before a delivery has it measured again (in the background): the quota
// takes effect within that long of being crossed, and lifts within that
// long of the purge that brings the project back under it.
const StorageTTL = time.Minute

// storageRetryAfter is what a delivery refused for storage is told to
// wait: the next measurement.
const storageRetryAfter = StorageTTL

// RunSize estimates the bytes a finished run keeps: its trigger, the
// outputs, errors and logs of its steps at every depth, and a fixed part
// for the rest of its record. For stores that count as they write
// (dynamostore) rather than measure what they hold.
func RunSize(r Run) int64 {
	n := int64(512) + int64(len(r.Trigger.Body)+len(r.Trigger.RawBody)+len(r.Trigger.BodyBase64)+len(r.Error))
	for _, f := range r.Trigger.Files {
		n += int64(len(f.Base64))
	}
	if r.Response != nil {
		n += int64(len(r.Response.Body))
	}
	return n + stepsSize(r.Steps) + stepsSize(r.OnErrorSteps)
}

func stepsSize(steps []StepResult) int64 {
	var n int64
	for _, st := range steps {
		n += 128 + int64(len(st.Output)+len(st.Error))
		for _, l := range st.Logs {
			n += int64(len(l))
		}
		n += stepsSize(st.Steps)
		for _, it := range st.Iterations {
			n += 32 + stepsSize(it.Steps)
		}
	}
	return n
}

// storageUsage caches each project's measured storedBytes: one small
// entry per project that received a delivery or asked its usage.
type storageUsage struct {
	mu sync.Mutex
	m  map[string]*measured
}

type measured struct {
	bytes     int64
	at        time.Time
	measuring bool
	known     bool
}

// storedBytes measures the project's usage now and keeps it.
func (s *ProjectService) storedBytes(ctx context.Context, project string) (int64, error) {
	n, err := s.store.StoredBytes(ctx, project)
	if err != nil {
		return 0, wrap("measure stored bytes", err)
	}
	s.storage.keep(project, n, s.clock())
	return n, nil
}

func (u *storageUsage) keep(project string, n int64, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string]*measured{}
	}
	u.m[project] = &measured{bytes: n, at: at, known: true}
}

// lookup returns the project's last measurement and whether it is due
// for another, claiming that one for the caller when it is.
func (u *storageUsage) lookup(project string, now time.Time) (n int64, known, measure bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string]*measured{}
	}
	m := u.m[project]
	if m == nil {
		m = &measured{}
		u.m[project] = m
	}
	if !m.measuring && (!m.known || now.Sub(m.at) >= StorageTTL) {
		m.measuring, measure = true, true
	}
	return m.bytes, m.known, measure
}

func (u *storageUsage) failed(project string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if m := u.m[project]; m != nil {
		m.measuring = false
	}
}

// admitStorage refuses a delivery while the project's last measured
// usage is over its storedBytes quota: 429 with Retry-After, naming the
// quota. It never measures on the delivery's path: a due measurement runs
// in the background, and a project not measured yet is let through.
func (s *ProjectService) admitStorage(ctx context.Context, project string, l Limits, plan Plan) error {
	if l.StoredBytes == nil {
		return nil
	}
	n, known, measure := s.storage.lookup(project, s.clock())
	if measure {
		go func() {
			mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if _, err := s.storedBytes(mctx, project); err != nil {
				s.storage.failed(project)
				s.log.WarnContext(mctx, "measure stored bytes", "project", project, "err", err)
			}
		}()
	}
	if !known || n <= *l.StoredBytes {
		return nil
	}
	return &RateLimited{Err: &Error{Kind: ErrRateLimited, Code: "QUOTA_EXCEEDED", Message: fmt.Sprintf(
		"the project keeps %d bytes of runs, samples, state and flow versions, over the %d its %s plan allows (limits.storedBytes); no run is started until old runs are purged or the operator raises the limit",
		n, *l.StoredBytes, plan)}, RetryAfter: storageRetryAfter}
}
