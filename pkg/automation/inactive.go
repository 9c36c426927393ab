package automation

import "fmt"

// InactiveFlow is the 404 a webhook of an INACTIVE flow answers: not the
// FLOW_NOT_FOUND of an unknown one, since every new flow starts inactive
// and its author needs to learn what to do. Code FLOW_INACTIVE.
func InactiveFlow(id string) *Error {
	id = ClipID(id)
	return &Error{Kind: ErrNotFound, Code: "FLOW_INACTIVE", Message: fmt.Sprintf(
		"flow %q is INACTIVE: enable it (POST /api/v1/flows/%s/enable, flowctl flows enable %s, or Enable in the dashboard) "+
			"to receive webhooks, or arm its Test trigger to let one delivery through", id, id, id)}
}
