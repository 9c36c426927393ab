package automation

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func runAt(id string, created time.Time) Run { return Run{ID: id, Created: created} }

// Runs over a concurrency bound wait in arrival order: a run that arrived
// later is refused while an earlier one waits, even if it asks first.
func TestTakeSlotKeepsArrivalOrder(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	b := bound{limit: 1, hold: time.Minute, release: true}
	var sl Slots
	var ok bool
	sl, ok, _ = takeSlot(sl, b, runAt("a", t0), t0, time.Second)
	if !ok {
		t.Fatal("first run refused")
	}
	for i, id := range []string{"b", "c", "d"} {
		if sl, ok, _ = takeSlot(sl, b, runAt(id, t0.Add(time.Duration(i+1)*time.Millisecond)), t0, time.Second); ok {
			t.Fatalf("%s admitted while a holds the slot", id)
		}
	}
	var wake []string
	sl, wake = releaseSlot(sl, b, "a", t0)
	if !slices.Equal(wake, []string{"b"}) {
		t.Fatalf("woken %v, want [b]", wake)
	}
	// d and c ask before b: refused, b was first.
	for _, id := range []string{"d", "c"} {
		created := map[string]time.Duration{"c": 2, "d": 3}[id] * time.Millisecond
		if sl, ok, _ = takeSlot(sl, b, runAt(id, t0.Add(created)), t0, time.Second); ok {
			t.Fatalf("%s overtook b", id)
		}
	}
	if sl, ok, _ = takeSlot(sl, b, runAt("b", t0.Add(time.Millisecond)), t0, time.Second); !ok {
		t.Fatal("b refused though first in line")
	}
	if got := waitingRuns(sl); !slices.Equal(got, []string{"c", "d"}) {
		t.Errorf("line %v, want [c d]", got)
	}
}

func waitingRuns(sl Slots) []string {
	var ids []string
	for _, w := range sl.Waiting {
		ids = append(ids, w.Run)
	}
	return ids
}

// A hold expires with its lease, so a runner that died leaks nothing; a
// place in line expires past its next try.
func TestSlotsExpire(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	b := bound{limit: 1, hold: time.Minute, release: true}
	sl, _, _ := takeSlot(Slots{}, b, runAt("crashed", t0), t0, time.Second)
	sl, ok, _ := takeSlot(sl, b, runAt("next", t0), t0.Add(59*time.Second), time.Second)
	if ok {
		t.Fatal("admitted while the hold is live")
	}
	if _, ok, _ = takeSlot(sl, b, runAt("next", t0), t0.Add(61*time.Second), time.Second); !ok {
		t.Fatal("refused after the crashed runner's hold expired")
	}
	// A run in line that never comes back loses its place.
	sl, _, _ = takeSlot(Slots{}, b, runAt("holder", t0), t0, time.Second)
	sl, _, _ = takeSlot(sl, b, runAt("gone", t0), t0, time.Second)
	sl, _ = releaseSlot(sl, b, "holder", t0.Add(time.Second))
	late := t0.Add(time.Second + slotGrace + 2*time.Second)
	if _, ok, _ = takeSlot(sl, b, runAt("later", t0.Add(time.Hour)), late, time.Second); !ok {
		t.Fatal("a run that left the line still blocks it")
	}
}

// A throttle admits limit starts per period; the next one is told to try
// when the oldest start leaves the period, and finishing frees nothing.
func TestTakeSlotThrottle(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	b := bound{limit: 2, hold: time.Minute}
	var sl Slots
	for i := range 2 {
		var ok bool
		if sl, ok, _ = takeSlot(sl, b, runAt(fmt.Sprint(i), t0), t0.Add(time.Duration(i)*time.Second), time.Second); !ok {
			t.Fatalf("start %d refused", i)
		}
	}
	sl2, ok, retry := takeSlot(sl, b, runAt("x", t0), t0.Add(2*time.Second), time.Second)
	if ok || !retry.Equal(t0.Add(time.Minute)) {
		t.Fatalf("third start: ok=%v retry=%v, want refused until %v", ok, retry, t0.Add(time.Minute))
	}
	if _, ok, _ = takeSlot(sl2, b, runAt("x", t0), t0.Add(time.Minute+time.Millisecond), time.Second); !ok {
		t.Fatal("refused after the oldest start left the period")
	}
}

func TestLineIsBounded(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	b := bound{limit: 1, hold: time.Minute, release: true}
	sl, _, _ := takeSlot(Slots{}, b, runAt("h", t0), t0, time.Second)
	for i := range MaxSlotWaiters + 10 {
		sl, _, _ = takeSlot(sl, b, runAt(fmt.Sprintf("w%03d", i), t0.Add(time.Duration(i+1)*time.Millisecond)), t0, time.Second)
	}
	if len(sl.Waiting) != MaxSlotWaiters {
		t.Errorf("line of %d, want at most %d", len(sl.Waiting), MaxSlotWaiters)
	}
}

// An attempt that lost its lease gives back nothing: the attempt that
// claimed the run after it holds the slot now.
func TestReleaseKeepsALaterAttemptsHold(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	b := bound{limit: 1, hold: time.Minute, release: true}
	sl, _, _ := takeSlot(Slots{}, b, runAt("r", t0), t0, time.Second)
	first := b
	first.until = sl.Held["r"]
	later := t0.Add(90 * time.Second) // the first attempt's hold ran out; a new claim took it again
	sl, ok, _ := takeSlot(sl, b, runAt("r", t0), later, time.Second)
	if !ok {
		t.Fatal("the later attempt was refused")
	}
	sl, _ = releaseSlot(sl, first, "r", later)
	if _, held := sl.Held["r"]; !held {
		t.Fatal("the first attempt's late release dropped the later attempt's hold")
	}
	second := b
	second.until = sl.Held["r"]
	if sl, _ = releaseSlot(sl, second, "r", later); len(sl.Held) != 0 {
		t.Fatalf("the later attempt's release left %v", sl.Held)
	}
}
