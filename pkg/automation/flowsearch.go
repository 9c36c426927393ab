package automation

import (
	"cmp"
	"context"
	"slices"
	"strings"
)

// MaxFlowSearch bounds the flows one search reads: a project with more is
// searched in its first MaxFlowSearch flows (in the store's order) and the
// result says so (Partial). At 100 flows a store page, that is 50 reads.
const MaxFlowSearch = 5000

// maxFlowSearch is MaxFlowSearch, lowered by tests.
var maxFlowSearch = MaxFlowSearch

// MaxFlowSearchPage bounds a page of a flow search.
const MaxFlowSearchPage = 100

// FlowSorts are the orders a flow search takes, each with its default
// direction: names A to Z, the rest newest or highest first.
var FlowSorts = []string{"name", "lastRun", "successRate", "created"}

// FlowSearch asks for one page of the project's flows whose name holds
// Name (any case), with Status (ACTIVE, INACTIVE or ""), ordered by Sort
// ("" is name) in Order ("asc", "desc" or "" for the sort's default).
// Page counts from 1; Limit is 1 to MaxFlowSearchPage.
type FlowSearch struct {
	Name, Status, Sort, Order string
	Page, Limit               int
}

// FlowSearchResult is one page of a flow search.
type FlowSearchResult struct {
	Flows       []FlowSummary
	Total       int // flows that match
	Page, Pages int
	// Partial: the project holds more than MaxFlowSearch flows; only the
	// first were searched.
	Partial bool
	// Sort and Order are those in force (defaults filled in).
	Sort, Order string
}

// SearchFlows finds, sorts and pages the project's flows on the server, so
// that a list of hundreds of flows needs no paging through to find one.
// Stores list flows in one order only, so the search reads the project's
// flows (at most MaxFlowSearch) and orders them here.
func (s *FlowService) SearchFlows(ctx context.Context, p Project, in FlowSearch) (FlowSearchResult, error) {
	if in.Status != "" && in.Status != string(FlowActive) && in.Status != string(FlowInactive) {
		return FlowSearchResult{}, InvalidCode("INVALID_PARAMETER", "status must be ACTIVE or INACTIVE, got %q", ClipID(in.Status))
	}
	if in.Sort == "" {
		in.Sort = "name"
	}
	if !slices.Contains(FlowSorts, in.Sort) {
		return FlowSearchResult{}, InvalidCode("INVALID_PARAMETER", "sort must be one of %s, got %q", strings.Join(FlowSorts, ", "), ClipID(in.Sort))
	}
	if in.Order == "" {
		in.Order = "desc"
		if in.Sort == "name" {
			in.Order = "asc"
		}
	}
	if in.Order != "asc" && in.Order != "desc" {
		return FlowSearchResult{}, InvalidCode("INVALID_PARAMETER", "order must be asc or desc, got %q", ClipID(in.Order))
	}
	if in.Limit < 1 || in.Limit > MaxFlowSearchPage {
		return FlowSearchResult{}, InvalidCode("INVALID_PARAMETER", "limit must be an integer from 1 to %d, got %d", MaxFlowSearchPage, in.Limit)
	}
	if in.Page < 1 {
		return FlowSearchResult{}, InvalidCode("INVALID_PARAMETER", "page must be a whole number from 1, got %d", in.Page)
	}
	name := strings.ToLower(strings.TrimSpace(in.Name))
	var all []FlowSummary
	out := FlowSearchResult{Sort: in.Sort, Order: in.Order}
	q := ListQuery{Limit: min(MaxPageSize, maxFlowSearch), Status: in.Status}
	for read := 0; ; {
		page, err := s.store.ListFlows(ctx, p.ID, q)
		if err != nil {
			return FlowSearchResult{}, wrap("search flows", err)
		}
		for _, f := range page.Items {
			if name == "" || strings.Contains(strings.ToLower(f.Name), name) {
				all = append(all, f.Summary())
			}
		}
		read += len(page.Items)
		if page.Next == "" {
			break
		}
		if read >= maxFlowSearch {
			out.Partial = true
			break
		}
		q.After = page.Next
	}
	slices.SortStableFunc(all, flowOrder(in.Sort, in.Order == "desc"))
	out.Total = len(all)
	out.Pages = max(1, (len(all)+in.Limit-1)/in.Limit)
	out.Page = min(in.Page, out.Pages)
	from := (out.Page - 1) * in.Limit
	out.Flows = all[from:min(from+in.Limit, len(all))]
	return out, nil
}

// flowOrder compares two flows by sort; ties and flows without the value
// (never run) come after, by name then ID, whatever the direction.
func flowOrder(sort string, desc bool) func(a, b FlowSummary) int {
	dir := func(c int) int {
		if desc {
			return -c
		}
		return c
	}
	byName := func(a, b FlowSummary) int {
		return cmp.Or(cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)), cmp.Compare(a.ID, b.ID))
	}
	return func(a, b FlowSummary) int {
		switch sort {
		case "lastRun":
			switch {
			case a.LastRun == nil && b.LastRun == nil:
			case a.LastRun == nil:
				return 1
			case b.LastRun == nil:
				return -1
			default:
				if c := a.LastRun.Compare(*b.LastRun); c != 0 {
					return dir(c)
				}
			}
		case "successRate":
			// A flow that never ran has no rate, not 0%.
			switch {
			case a.RunCount == 0 && b.RunCount == 0:
			case a.RunCount == 0:
				return 1
			case b.RunCount == 0:
				return -1
			default:
				if c := cmp.Compare(a.SuccessRate, b.SuccessRate); c != 0 {
					return dir(c)
				}
			}
		case "created":
			if c := a.Created.Compare(b.Created); c != 0 {
				return dir(c)
			}
		default:
			return dir(byName(a, b))
		}
		return byName(a, b)
	}
}
