package engine

import (
	"context"
	"fmt"
	"strings"

	"flowservice/pkg/automation"
)

// namesConnections reports whether a flow has an HTTP step that names its
// connection.
func namesConnections(f automation.Flow) bool {
	found := false
	check := func(s *automation.Step) {
		if s.Connection != "" {
			found = true
		}
	}
	automation.WalkSteps(f.Steps, check)
	automation.WalkSteps(f.OnError, check)
	return found
}

// loadConnectionNames resolves the project's connection names once, when
// the run (attempt) starts and its flow names connections.
func (x *execution) loadConnectionNames(ctx context.Context) *stepError {
	if !namesConnections(x.flow) {
		return nil
	}
	names := x.e.names
	if names == nil {
		x.sh.connIDs = map[string][]string{}
		return nil
	}
	ids, err := names.ConnectionIDsByName(ctx, x.flow.Project)
	if err != nil {
		x.e.log.WarnContext(ctx, "read connection names", "run", x.run.ID, "flow", x.flow.ID, "err", err)
		return &stepError{msg: "the project's connections could not be read; the run will be retried", retryable: true}
	}
	x.sh.connIDs = ids
	return nil
}

// connectionID is the connection an HTTP step uses: its connectionId, or
// the one its connection name resolved to when the run started.
func (x *execution) connectionID(s automation.Step) (string, *stepError) {
	if s.Connection == "" {
		return s.ConnectionID, nil
	}
	ids := x.sh.connIDs[s.Connection]
	switch len(ids) {
	case 0:
		return "", &stepError{msg: fmt.Sprintf("connection %q does not exist in the project (create it, or correct the step's connection)", s.Connection)}
	case 1:
		return ids[0], nil
	}
	return "", &stepError{msg: fmt.Sprintf("connection name %q is ambiguous: connections %s carry it (rename all but one, or use connectionId)", s.Connection, strings.Join(ids, ", "))}
}
