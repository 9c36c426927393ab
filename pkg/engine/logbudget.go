package engine

import "fmt"

// keepLogs is what a step's console lines may add to its run: they count
// against the run's output budget (Config.MaxRunOutputBytes) with the
// outputs, so that a FOR_EACH of CODE steps that log all they may (100
// lines of 2 KiB each, per item) cannot grow a run past it. Lines are kept
// in order while they fit what is left of the budget; the rest are
// replaced by one line that says how many were dropped and why. It is
// called holding the run's lock, and charges what it keeps.
func (x *execution) keepLogs(logs []string) []string {
	if len(logs) == 0 {
		return logs
	}
	left := x.e.maxRun - x.sh.spent
	kept := 0
	for _, l := range logs {
		n := int64(len(l)) + 3 // as a JSON string in a list: quotes and comma
		if n > left {
			break
		}
		left -= n
		x.sh.spent += n
		kept++
	}
	if kept == len(logs) {
		return logs
	}
	dropped := 0
	for _, l := range logs[kept:] {
		dropped += len(l)
	}
	note := fmt.Sprintf("… %d more log lines (%d bytes) not kept: the run's output budget of %d bytes is spent",
		len(logs)-kept, dropped, x.e.maxRun)
	x.sh.spent += int64(len(note))
	return append(logs[:kept:kept], note)
}
