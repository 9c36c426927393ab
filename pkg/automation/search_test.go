package automation_test

import (
	"context"
	"fmt"
	"testing"

	"flowservice/pkg/automation"
)

// TestFlowSearchIsBounded: a search reads at most its bound of flows (here
// lowered to 12) and says the result is partial; under the bound it is
// whole, sorted and paged; bad input is a 400 naming the parameter.
func TestFlowSearchIsBounded(t *testing.T) {
	automation.LowerSearchBounds(t, 12, automation.MaxAuditScan)
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	for i := range 15 {
		name, eng := fmt.Sprintf("flow %02d", i), automation.FlowBuilder
		if _, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Engine: &eng}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.svc.SearchFlows(ctx, e.project, automation.FlowSearch{Page: 1, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Partial || res.Total != 12 || res.Pages != 3 || len(res.Flows) != 5 || res.Flows[0].Name != "flow 00" {
		t.Errorf("search over 15 flows with a bound of 12: partial %v, total %d, pages %d, %d flows from %q",
			res.Partial, res.Total, res.Pages, len(res.Flows), res.Flows[0].Name)
	}
	res, err = e.svc.SearchFlows(ctx, e.project, automation.FlowSearch{Name: "FLOW 1", Sort: "name", Order: "desc", Page: 9, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	// "flow 1x" within the first 12 read: 10 and 11; page 9 is the last.
	if res.Total != 2 || res.Page != 1 || res.Flows[0].Name != "flow 11" {
		t.Errorf("search for FLOW 1: total %d, page %d, first %q", res.Total, res.Page, res.Flows[0].Name)
	}
	for _, bad := range []automation.FlowSearch{{Sort: "size", Page: 1, Limit: 5}, {Order: "up", Page: 1, Limit: 5},
		{Page: 0, Limit: 5}, {Page: 1, Limit: 101}, {Status: "ON", Page: 1, Limit: 5}} {
		if _, err := e.svc.SearchFlows(ctx, e.project, bad); !automation.HasCode(err, "INVALID_PARAMETER") {
			t.Errorf("search %+v: %v, want INVALID_PARAMETER", bad, err)
		}
	}
}

// TestAuditFilterScanIsBounded: a page of the audit log filtered by actor
// reads at most its bound of entries (here 30): with the one matching
// entry past it, the first page is empty with a cursor, and the cursor
// leads to the entry. Without a filter, pages are as before.
func TestAuditFilterScanIsBounded(t *testing.T) {
	automation.LowerSearchBounds(t, automation.MaxFlowSearch, 30)
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	rare := automation.Principal{Project: e.project, KeyID: "key_rare", Role: automation.RoleViewer}
	often := automation.Principal{Project: e.project, KeyID: "key_often", Role: automation.RoleAdmin}
	record := func(pr automation.Principal, action string) {
		t.Helper()
		if err := e.svc.RecordAudit(ctx, e.svc.NewAuditEntry(pr, action, automation.AuditResource{Type: "session", ID: pr.KeyID}, "r", "")); err != nil {
			t.Fatal(err)
		}
	}
	record(rare, "session.signin") // the oldest
	for range 40 {
		record(often, "flow.update")
	}
	page, err := e.svc.AuditLog(ctx, e.project, automation.AuditSearch{Actor: "key_rare"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 0 || page.Cursor == nil {
		t.Fatalf("first filtered page: %d entries, cursor %v; want none and a cursor (the scan stopped at 30)", len(page.Data), page.Cursor)
	}
	page, err = e.svc.AuditLog(ctx, e.project, automation.AuditSearch{Actor: "key_rare", PageRequest: automation.PageRequest{Cursor: *page.Cursor}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].Actor.KeyID != "key_rare" || page.Cursor != nil {
		t.Fatalf("second filtered page: %+v, cursor %v", page.Data, page.Cursor)
	}
	byAction, err := e.svc.AuditLog(ctx, e.project, automation.AuditSearch{Action: "flow", PageRequest: automation.PageRequest{Limit: "7"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(byAction.Data) != 7 || byAction.Cursor == nil || byAction.Data[0].Action != "flow.update" {
		t.Errorf("action=flow: %d entries, cursor %v", len(byAction.Data), byAction.Cursor)
	}
	if _, err := e.svc.AuditLog(ctx, e.project, automation.AuditSearch{Actor: "key_rare", PageRequest: automation.PageRequest{Cursor: *byAction.Cursor}}); !automation.HasCode(err, "INVALID_CURSOR") {
		t.Errorf("a cursor of another filter: %v, want INVALID_CURSOR", err)
	}
}
