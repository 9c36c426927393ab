package automation

import "context"

// nameRouteHolder turns a ROUTE_CONFLICT from the store into one that names
// the flow holding the route when that flow is of the same project, so its
// author knows which of their flows to change. A holder of another project
// stays unnamed (PathTaken): IDs and names never cross projects. Any other
// error, or a failure to find the holder, leaves err as it is.
func (s *FlowService) nameRouteHolder(ctx context.Context, f Flow, err error) error {
	if !IsRouteConflict(err) {
		return err
	}
	for _, r := range f.Routes() {
		held, lerr := s.store.RouteFlows(ctx, r.Path)
		if lerr != nil {
			return err
		}
		id, ok := held[r.Method]
		if !ok || id == f.ID {
			continue
		}
		holder, ferr := s.store.FlowByID(ctx, id)
		if ferr != nil || holder.Project != f.Project {
			continue
		}
		return Conflict(CodeRouteConflict, "%s on webhook path %q is already received by the flow %q (%s) of this project: change the path of one of them",
			r.Method, r.Path, ClipID(holder.Name), holder.ID)
	}
	return err
}
