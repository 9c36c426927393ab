package dashboard

import "flowservice/pkg/automation"

// waitHint says in words what a waiting run waits for (Run.WaitingFor),
// so the run page explains why a RUNNING run is not executing.
func waitHint(w automation.WaitReason) string {
	switch w {
	case automation.WaitingConcurrency:
		return "the flow's concurrency limit: it starts when a run holding its slot ends"
	case automation.WaitingThrottle:
		return "the flow's throttle: it starts when the period allows another start"
	case automation.WaitingQuota:
		return "the project's concurrentRuns quota: it starts when another run of the project ends"
	case automation.WaitingWait:
		return "a WAIT step"
	case automation.WaitingRetry:
		return "the backoff before its next attempt"
	}
	return ""
}
