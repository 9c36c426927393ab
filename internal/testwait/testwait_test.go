package testwait

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	n := 0
	if !Until(time.Minute, func() bool { n++; return n == 3 }) {
		t.Fatal("Until gave up on a condition that came true")
	}
	if n != 3 {
		t.Errorf("cond called %d times, want 3: Until must stop at the first true", n)
	}
	if Until(0, func() bool { return false }) {
		t.Error("Until reported true for a condition that never held")
	}
}

// TestForFails runs For in a test of its own that must fail.
func TestForFails(t *testing.T) {
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() { // Fatalf ends the goroutine, as in a real test
		defer close(done)
		For(ft, 0, "something that never happens", func() bool { return false })
	}()
	<-done
	if ft.msg != "waited 0s for something that never happens" {
		t.Errorf("For reported %q", ft.msg)
	}
}

type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestEvent(t *testing.T) {
	n := 0
	Event(t, "the third check", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond called %d times, want 3: Event must stop at the first true", n)
	}
}

func TestPaced(t *testing.T) {
	n := 0
	Paced(t, time.Millisecond, "the second check", func() bool { n++; return n == 2 })
	if n != 2 {
		t.Errorf("cond called %d times, want 2", n)
	}
}
