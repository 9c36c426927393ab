package automation

import "flowservice/pkg/flowdef"

// ResponseHeaderAllowed reports whether a RESPOND step may set the header
// name (flowdef's rule): the receivers check it again when they send, so
// that a definition stored before a rule existed still cannot set what
// they own.
func ResponseHeaderAllowed(name string) bool { return flowdef.ResponseHeaderAllowed(name) }
