package automation

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Chains of flows that call one another's webhooks are bounded: every HTTP
// step sends FlowDepthHeader with its run's depth plus one, and a receiver
// refuses a delivery deeper than MaxFlowDepth with 508 LOOP_DETECTED, so a
// flow that calls its own webhook stops at the sixth run instead of
// growing without end.
const (
	FlowDepthHeader = "X-Flow-Depth"
	MaxFlowDepth    = 5
	// FlowRunHeader names the run that sends an outbound request, so that
	// the receiving service can tell who calls it.
	FlowRunHeader = "X-Flow-Run"
)

// ErrLoop is the kind of a delivery refused for its depth (508).
var ErrLoop = errors.New("loop detected")

// LoopDetected is the error of a delivery at depth past MaxFlowDepth.
func LoopDetected(depth int) *Error {
	return &Error{Kind: ErrLoop, Code: "LOOP_DETECTED", Message: fmt.Sprintf(
		"this delivery comes from a chain of %d flows calling one another (%s); at most %d are allowed",
		depth, FlowDepthHeader, MaxFlowDepth)}
}

// ParseFlowDepth reads a FlowDepthHeader value: a missing, negative or
// malformed value is depth 0 (a caller outside the service), and a huge
// one is capped, so no sender can make the number overflow.
func ParseFlowDepth(v string) int {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return min(n, 1000)
}

// Depth is the run's place in a chain of flows: the depth its trigger
// carried (0 when it came from outside).
func (t TriggerData) Depth() int {
	return ParseFlowDepth(t.Headers[strings.ToLower(FlowDepthHeader)])
}
