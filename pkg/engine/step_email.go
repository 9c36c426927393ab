package engine

import (
	"context"

	"flowservice/pkg/automation"
)

func (x *execution) email(ctx context.Context, s automation.Step) (any, error) {
	return nil, &stepError{msg: "EMAIL steps are not available in this build"}
}
