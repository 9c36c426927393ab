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
	"strconv"
	"strings"
	"time"
)

// client is a small typed client of the management API. It never puts the
// API key into an error or a log line.
type client struct {
	base string // http://host:port, no trailing slash
	key  string
	http *http.Client
	// sleep waits out a 429's Retry-After (tests replace it); nil is a
	// timer that ctx may end.
	sleep func(ctx context.Context, d time.Duration) error
}

// Bounds of the waits on 429 Too Many Requests: a command that makes many
// requests (apply on a project of many flows) runs into the server's rate
// limit, which the answer's Retry-After says how long to wait out. A
// request is sent again at most rateRetries times, each wait at most
// maxRetryAfter, so a server that keeps refusing ends the command within
// about a minute with its RATE_LIMITED error.
const (
	rateRetries   = 8
	maxRetryAfter = 10 * time.Second
)

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
//
// A 429 RATE_LIMITED answer (the request was refused before it did
// anything) is waited out as its Retry-After says and sent again, within
// rateRetries and maxRetryAfter.
func (c *client) do(ctx context.Context, method, path string, q url.Values, body []byte, out any) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		var wait time.Duration
		raw, err := c.send(ctx, method, path, q, body, out, &wait)
		if wait == 0 || attempt >= rateRetries {
			return raw, err
		}
		if err := c.wait(ctx, wait); err != nil {
			return nil, fmt.Errorf("%s %s: waiting out the rate limit: %w", method, path, err)
		}
	}
}

// wait sleeps d, or less should ctx end first.
func (c *client) wait(ctx context.Context, d time.Duration) error {
	if c.sleep != nil {
		return c.sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryAfter is how long a 429 answer asks to wait: its Retry-After in
// seconds (an HTTP date too), at least one second, at most maxRetryAfter.
func retryAfter(h http.Header, now time.Time) time.Duration {
	d := time.Second
	v := strings.TrimSpace(h.Get("Retry-After"))
	if n, err := strconv.Atoi(v); err == nil {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, time.Second), maxRetryAfter)
}

// send sends a request once; a 429 RATE_LIMITED answer sets *wait to how long it asks
// to wait before sending it again.
func (c *client) send(ctx context.Context, method, path string, q url.Values, body []byte, out any, wait *time.Duration) ([]byte, error) {
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
			if resp.StatusCode == http.StatusTooManyRequests && env.Error.Code == "RATE_LIMITED" {
				// A rate, not a quota (QUOTA_EXCEEDED is said at once).
				*wait = retryAfter(resp.Header, time.Now())
			}
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
		s = strings.ToValidUTF8(s[:200], "") + "…"
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
