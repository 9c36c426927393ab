package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"flowservice/pkg/automation"
)

// paginate walks a paginated API with the step's request: page after page
// while next gives a URL or a cursor, at most maxPages, collecting what
// items gives of each page. It outputs {"items": [...], "pages": N}. The
// items are held until the step ends and become its output, so together
// they may take at most what is left of the run's output budget
// (Config.MaxRunOutputBytes): past it the step fails, rather than record a
// list cut short without saying so.
func (x *execution) paginate(ctx context.Context, s automation.Step, cred credential) (any, error) {
	return x.paginateWith(ctx, s, cred, func() (*http.Request, error) { return x.request(ctx, s) })
}

// paginateWith walks pages of the request build makes (an ACTION step
// builds its own, step_action.go).
func (x *execution) paginateWith(ctx context.Context, s automation.Step, cred credential, build func() (*http.Request, error)) (any, error) {
	p := s.Paginate
	maxPages := p.MaxPages
	if maxPages <= 0 {
		maxPages = automation.DefaultMaxPages
	}
	var left int64
	x.locked(func() { left = x.e.maxRun - x.sh.spent })

	items := []any{}
	size := int64(len(`{"items":[],"pages":100}`))
	var (
		next    any
		last    *url.URL // the URL of the page just fetched
		lastKey string   // next as text, to stop when it repeats
		pages   int
	)
	for pages < maxPages {
		req, err := build()
		if err != nil {
			return nil, cred.masked(err.Error())
		}
		if pages > 0 {
			if err := nextPage(req, p, next, last); err != nil {
				return nil, cred.masked(err.Error())
			}
		}
		last = cloneURL(req.URL)
		resp, se := x.exchange(ctx, s, cred, req, pages+1)
		if se != nil {
			se.msg = fmt.Sprintf("paginate page %d: %s", pages+1, se.msg)
			return nil, se
		}
		pages++

		got, err := x.e.checker.evalResponse(p.Items, x.env, resp)
		if err != nil {
			return nil, cred.masked(fmt.Sprintf("paginate.items on page %d: %v", pages, err))
		}
		list, ok := got.([]any)
		if !ok && got != nil {
			return nil, cred.masked(fmt.Sprintf("paginate.items on page %d must give a list, got %s", pages, clipTo(describeValue(got), maxQuote)))
		}
		b, err := json.Marshal(list)
		if err != nil {
			return nil, &stepError{msg: fmt.Sprintf("paginate.items on page %d: %v", pages, err)}
		}
		if size += int64(len(b)); size > left {
			return nil, &stepError{msg: fmt.Sprintf("paginate: the items of %d pages come to more than the %d bytes left of the run's output budget (%d bytes); lower maxPages or select less with items",
				pages, max(left, 0), x.e.maxRun)}
		}
		items = append(items, list...)

		next, err = x.e.checker.evalResponse(p.Next, x.env, resp)
		if err != nil {
			return nil, cred.masked(fmt.Sprintf("paginate.next on page %d: %v", pages, err))
		}
		key := text(next)
		if next == nil || next == false || key == "" || key == lastKey {
			break // the last page; or an API that repeats its cursor
		}
		lastKey = key
	}
	return map[string]any{"items": items, "pages": pages}, nil
}

// nextPage points req at the page next names: next as a cursor in the query
// parameter p.Param, or else as a URL (absolute, or "/…" or "?…" relative
// to the last page's).
func nextPage(req *http.Request, p *automation.Paginate, next any, last *url.URL) error {
	if p.Param != "" {
		q := req.URL.Query()
		q.Set(p.Param, text(next))
		req.URL.RawQuery = q.Encode()
		return nil
	}
	s, ok := next.(string)
	if !ok {
		return fmt.Errorf("paginate.next gave %s, not a URL; to pass a cursor, name its query parameter in paginate.param", clipTo(describeValue(next), maxQuote))
	}
	// A relative reference must look like one ("/path", "?page=2"): a bare
	// word is far more likely a cursor given without param.
	u, err := url.Parse(s)
	if err == nil && u.Scheme == "" {
		if !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "?") {
			err = errors.New("a bare word")
		}
		u = last.ResolveReference(u)
	}
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("paginate.next gave %q, not an http or https URL; to pass a cursor, name its query parameter in paginate.param", clipTo(s, maxQuote))
	}
	req.URL, req.Host = u, u.Host
	return nil
}

func cloneURL(u *url.URL) *url.URL {
	c := *u
	return &c
}
