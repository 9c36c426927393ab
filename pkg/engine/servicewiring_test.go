package engine

import "flowservice/pkg/automation"

// Every wiring hands the executor the whole automation.Service as its
// Credentials, and the engine finds its other ports there by interface
// (Config: State, Variables, Calls, the outbound gate, connection names).
// The Service gets these methods from the services it embeds; a method
// that became ambiguous between two of them would silently leave its
// method set, and the engine would quietly go without. These fail to
// compile instead.
var (
	_ Credentials             = (*automation.Service)(nil)
	_ State                   = (*automation.Service)(nil)
	_ Variables               = (*automation.Service)(nil)
	_ Calls                   = (*automation.Service)(nil)
	_ ConnectionNames         = (*automation.Service)(nil)
	_ automation.OutboundGate = (*automation.Service)(nil)
	_ automation.Credentials  = (*automation.Service)(nil)
)
