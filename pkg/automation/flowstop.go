package automation

import "time"

// Disabling a flow stops its running runs at their next step
// (docs/reliability.md, "Stopping a flow's runs"). DisableFlow stamps the
// flow with StoppedAt; a run created at or before that instant is stopped:
//
//   - when an attempt starts, by the flow it reads anyway (execute), so a
//     run waiting (WAIT, a retry's backoff, the queue) ends when it wakes;
//   - while an attempt runs, by its journal write after each step with side
//     effects: RunStore.AppendSteps refuses with FlowStopped, checked in the
//     write the attempt makes anyway (an in-process record on flowd; on
//     DynamoDB a condition on a mark the disable puts on the running runs),
//     so no step costs a store round trip more.
//
// Such a run ends FAILED with StoppedMessage, without its onError steps
// (they would call out again for a flow its owner just stopped).

// CodeFlowStopped is the code of FlowStopped.
const CodeFlowStopped = "FLOW_STOPPED"

// StoppedMessage is the error of a run its flow's disabling stopped.
const StoppedMessage = "flow disabled"

// FlowStopped refuses a journal write of a run whose flow was disabled (or
// deleted) after the run was created.
func FlowStopped(runID string) *Error {
	return Conflict(CodeFlowStopped, "run %s: its flow was disabled", runID)
}

// IsFlowStopped reports whether err is FlowStopped.
func IsFlowStopped(err error) bool { return HasCode(err, CodeFlowStopped) }

// StopsRun reports whether a flow stopped at stoppedAt (nil: never) stops a
// run created at created: runs created after it (a test run of the
// disabled flow, runs after it was enabled again) go on.
func StopsRun(stoppedAt *time.Time, created time.Time) bool {
	return stoppedAt != nil && !created.After(*stoppedAt)
}
