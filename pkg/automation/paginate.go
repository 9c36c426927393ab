package automation

import "strings"

// Paginate makes an HTTP step walk a paginated API: after each page, Next
// (an expression over `response`) gives the next URL, or a cursor that goes
// into the query parameter Param, or null to stop; Items (an expression
// over `response`) gives the page's items. The step outputs {"items":
// [...], "pages": N} (docs/flows.md).
type Paginate struct {
	Next     string `json:"next"`
	Param    string `json:"param,omitempty"`
	Items    string `json:"items"`
	MaxPages int    `json:"maxPages,omitempty"`
}

// Bounds of Paginate.MaxPages: each page is a request and its items are
// held until the step ends, so the walk is bounded by pages as well as by
// the run's output budget.
const (
	DefaultMaxPages = 10
	MaxPages        = 100
)

// validatePaginate checks an HTTP step's paginate and sets the default
// maxPages.
func (s *flowValidator) validatePaginate(p *Paginate, at string) error {
	if strings.TrimSpace(p.Next) == "" {
		return Invalid(`%s.next is required: an expression over response giving the next URL, a cursor (with param) or null, e.g. "response.body.next"`, at)
	}
	if err := s.checker.ResponseExpression(p.Next); err != nil {
		return Invalid("%s.next: %v", at, err)
	}
	if strings.TrimSpace(p.Items) == "" {
		return Invalid(`%s.items is required: an expression over response giving the page's list, e.g. "response.body.data"`, at)
	}
	if err := s.checker.ResponseExpression(p.Items); err != nil {
		return Invalid("%s.items: %v", at, err)
	}
	if p.Param != "" {
		if err := checkText(at+".param", p.Param, 200); err != nil {
			return err
		}
	}
	if p.MaxPages == 0 {
		p.MaxPages = DefaultMaxPages
	}
	if p.MaxPages < 1 || p.MaxPages > MaxPages {
		return Invalid("%s.maxPages %d: use 1 to %d", at, p.MaxPages, MaxPages)
	}
	return nil
}
