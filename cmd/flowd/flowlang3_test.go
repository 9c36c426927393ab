package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Flow language 3 through a started flowd: the examples/ flows for
// pagination and polling against local stand-ins for the services they
// call.

// pagedCRM is a CRM whose contacts list is paginated by cursor, and a chat
// service that keeps the messages posted to it.
type pagedCRM struct {
	*httptest.Server
	mu       sync.Mutex
	contacts []map[string]any
	pageSize int
	lists    []string // the query of each list request
	messages []string
}

func newPagedCRM(t *testing.T, n, pageSize int) *pagedCRM {
	c := &pagedCRM{pageSize: pageSize}
	for i := range n {
		c.contacts = append(c.contacts, map[string]any{"id": "ct_" + strconv.Itoa(i), "name": "Contact " + strconv.Itoa(i)})
	}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/contacts":
			c.lists = append(c.lists, r.URL.RawQuery)
			from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
			to := min(from+c.pageSize, len(c.contacts))
			var next any
			if to < len(c.contacts) {
				next = strconv.Itoa(to)
			}
			json.NewEncoder(w).Encode(map[string]any{"contacts": c.contacts[from:to], "next_cursor": next})
		case "/api/messages":
			var m struct{ Text string }
			b, _ := io.ReadAll(r.Body)
			json.Unmarshal(b, &m)
			c.messages = append(c.messages, m.Text)
			fmt.Fprint(w, `{"ok":true}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *pagedCRM) seen() (lists, messages []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lists...), append([]string(nil), c.messages...)
}

// TestPaginatedFetchExample: examples/paginated-contacts-digest.json reads
// all pages of the CRM's contacts through real HTTP and posts one digest.
func TestPaginatedFetchExample(t *testing.T) {
	crm := newPagedCRM(t, 7, 3)
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_CODE_SANDBOX=false")
	key := initialKey(t, dir)
	id := createCodeFlow(t, p, key, example(t, "paginated-contacts-digest", crm.URL))
	_, r := postHook(t, p, key, id, "/api/v1/webhooks/"+id, `{"since": "2026-11-01"}`, nil)
	if r.Status != "SUCCEEDED" {
		t.Fatalf("run %s %q %+v", r.Status, r.Error, r.Steps)
	}
	var out struct {
		Items []map[string]any
		Pages int
	}
	if err := json.Unmarshal(r.Steps[0].Output, &out); err != nil || len(out.Items) != 7 || out.Pages != 3 || out.Items[6]["id"] != "ct_6" {
		t.Fatalf("contacts output %s (%v)", r.Steps[0].Output, err)
	}
	lists, messages := crm.seen()
	if len(lists) != 3 || !strings.Contains(lists[0], "created_after=2026-11-01") || strings.Contains(lists[0], "cursor=") || !strings.Contains(lists[2], "cursor=6") {
		t.Errorf("list requests %q, want 3 pages by cursor with the step's query", lists)
	}
	want := "7 new contacts since 2026-11-01 (3 pages): Contact 0, Contact 1, Contact 2, Contact 3, Contact 4, Contact 5, Contact 6"
	if len(messages) != 1 || messages[0] != want {
		t.Errorf("chat got %q, want %q", messages, want)
	}
}
