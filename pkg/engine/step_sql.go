package engine

import (
	"context"

	"flowservice/pkg/automation"
)

// dbPools are the SQL steps' connection pools (filled in below).
type dbPools struct{}

func (x *execution) sql(ctx context.Context, s automation.Step) (any, error) {
	return nil, &stepError{msg: "SQL steps are not available in this build"}
}
