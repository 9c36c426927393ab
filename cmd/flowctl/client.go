package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// client is a small typed client of the management API. It never puts the
// API key into an error or a log line.
type client struct {
	base string // http://host:port, no trailing slash
	key  string
	http *http.Client
}

func newClient(base, key string) (*client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q: want http://host:port or https://host", base)
	}
	return &client{
		base: strings.TrimRight(base, "/"),
		key:  key,
		http: &http.Client{Timeout: 30 * time.Second},
	}, nil
}

// apiError is the API's error envelope.
type apiError struct {
	Status    int    `json:"-"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"requestId"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s: %s (request %s)", e.Code, e.Message, e.RequestID)
}

// do sends a request and returns the response body of a 2xx answer; with out
// non-nil it also decodes the body into out. Any other answer is an error:
// an *apiError when the server sent the envelope.
func (c *client) do(ctx context.Context, method, path string, q url.Values, body []byte, out any) ([]byte, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is said below, once
		}
		return nil, fmt.Errorf("cannot reach flowd at %s: %v (is it running? --url or FLOWCTL_URL picks the server)", c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s%s: reading the answer: %w", method, c.base, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var env struct {
			Error *apiError `json:"error"`
		}
		if json.Unmarshal(raw, &env) == nil && env.Error != nil && env.Error.Code != "" {
			env.Error.Status = resp.StatusCode
			return nil, env.Error
		}
		return nil, fmt.Errorf("%s %s%s: HTTP %d: %s", method, c.base, path, resp.StatusCode, snippet(raw))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("%s %s%s: unexpected answer: %w", method, c.base, path, err)
		}
	}
	return raw, nil
}

// snippet is the start of a non-JSON answer, on one line.
func snippet(raw []byte) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}

// page is the list envelope of flows, runs and connections.
type page[T any] struct {
	Data    []T     `json:"data"`
	Cursor  *string `json:"cursor"`
	HasMore bool    `json:"hasMore"`
}

// fetchList fetches one page, or with all every page from cursor on. raw is the
// API's JSON: the page as sent, or for all one envelope holding every item.
func fetchList[T any](ctx context.Context, c *client, path string, q url.Values, all bool) (p page[T], raw []byte, err error) {
	var items []json.RawMessage
	for {
		var pg page[json.RawMessage]
		body, err := c.do(ctx, http.MethodGet, path, q, nil, &pg)
		if err != nil {
			return page[T]{}, nil, err
		}
		if !all {
			raw = body
			items = pg.Data
			p.Cursor, p.HasMore = pg.Cursor, pg.HasMore
			break
		}
		items = append(items, pg.Data...)
		if !pg.HasMore || pg.Cursor == nil || *pg.Cursor == "" {
			break
		}
		q.Set("cursor", *pg.Cursor)
	}
	if items == nil {
		items = []json.RawMessage{}
	}
	if all {
		raw, err = json.Marshal(page[json.RawMessage]{Data: items})
		if err != nil {
			return page[T]{}, nil, err
		}
	}
	p.Data = make([]T, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it, &p.Data[i]); err != nil {
			return page[T]{}, nil, fmt.Errorf("GET %s%s: unexpected item: %w", c.base, path, err)
		}
	}
	return p, raw, nil
}
