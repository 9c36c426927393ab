package dashboard

import (
	"net/http"

	"flowservice/pkg/automation"
)

// auditPage is the project's audit log, newest first (GET /api/v1/audit's
// entries, a page at a time).
func (d *Dashboard) auditPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	l, err := d.svc.AuditLog(r.Context(), project(r), automation.AuditSearch{
		PageRequest: automation.PageRequest{Limit: "50", Cursor: q.Get("cursor")},
	})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "audit", view{Title: "Audit log", Nav: "audit", Data: struct {
		Entries []automation.AuditEntry
		Pager   pager
	}{l.Data, newPager(r, nil, l.Cursor)}})
}
