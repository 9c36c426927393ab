package automation

import (
	"sync"
	"time"
)

// Password sign-in slowing (docs/reliability.md): after
// SigninFailuresPerEmail failed sign-ins for one email within
// SigninFailureWindow, that email's sign-ins are refused (429, before the
// password is checked) until the window that began with its first failure
// ends; likewise SigninFailuresPerAddress failures from one source
// address. Each table holds at most MaxSigninThrottleEntries keys, so a
// flood of new emails or addresses costs bounded memory: a full table
// forgets its expired windows first, then its oldest.
const (
	SigninFailuresPerEmail   = 5
	SigninFailuresPerAddress = 20
	SigninFailureWindow      = time.Minute
	MaxSigninThrottleEntries = 10_000
)

// signinThrottle counts failed password sign-ins per email and per source
// address, in memory: each process (each Lambda instance) counts its own,
// which bounds guessing per instance without a store write per attempt.
type signinThrottle struct {
	mu     sync.Mutex
	now    func() time.Time
	emails failTable
	addrs  failTable
}

type failTable struct {
	limit int
	m     map[string]*failWindow
}

type failWindow struct {
	start time.Time
	count int
}

func newSigninThrottle(now func() time.Time) *signinThrottle {
	return &signinThrottle{now: now,
		emails: failTable{limit: SigninFailuresPerEmail, m: map[string]*failWindow{}},
		addrs:  failTable{limit: SigninFailuresPerAddress, m: map[string]*failWindow{}},
	}
}

// wait returns how long the email or the address must wait before another
// attempt, or 0 when it may try now.
func (t *signinThrottle) wait(email, addr string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	return max(t.emails.wait(email, now), t.addrs.wait(addr, now))
}

// fail counts a failed attempt against the email and the address.
func (t *signinThrottle) fail(email, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.emails.fail(email, now)
	t.addrs.fail(addr, now)
}

// succeed forgets the email's failures: its owner knows the password.
// The address keeps its count (one address may be guessing many emails).
func (t *signinThrottle) succeed(email string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.emails.m, email)
}

// size returns the number of keys each table holds, for tests.
func (t *signinThrottle) size() (emails, addrs int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.emails.m), len(t.addrs.m)
}

func (ft *failTable) wait(key string, now time.Time) time.Duration {
	w, ok := ft.m[key]
	if key == "" || !ok || w.count < ft.limit {
		return 0
	}
	end := w.start.Add(SigninFailureWindow)
	if !now.Before(end) {
		return 0
	}
	return end.Sub(now)
}

func (ft *failTable) fail(key string, now time.Time) {
	if key == "" {
		return
	}
	if w, ok := ft.m[key]; ok {
		if now.Before(w.start.Add(SigninFailureWindow)) {
			w.count++
			return
		}
		w.start, w.count = now, 1
		return
	}
	if len(ft.m) >= MaxSigninThrottleEntries {
		ft.evict(now)
	}
	ft.m[key] = &failWindow{start: now, count: 1}
}

// evict makes room for one key: expired windows go first; if none has
// expired, the oldest window goes.
func (ft *failTable) evict(now time.Time) {
	var oldest string
	var oldestStart time.Time
	for k, w := range ft.m {
		if !now.Before(w.start.Add(SigninFailureWindow)) {
			delete(ft.m, k)
			continue
		}
		if oldest == "" || w.start.Before(oldestStart) {
			oldest, oldestStart = k, w.start
		}
	}
	if len(ft.m) >= MaxSigninThrottleEntries && oldest != "" {
		delete(ft.m, oldest)
	}
}
