package dashboard

import (
	"net/http"
	"testing"
)

// The editor's field help covers paginate and POLL triggers, from the API
// document.
func TestEditorHelpForFlowLanguage3(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	p := b.get("/ui/flows/new")
	wantPage(t, p, http.StatusOK, "<dt>steps[].paginate.next</dt>", "<dt>steps[].paginate.param</dt>",
		"<dt>steps[].paginate.items</dt>", "<dt>steps[].paginate.maxPages</dt>", "Over 100 is a 400",
		"<dt>trigger.poll.every</dt>", "<dt>trigger.poll.request.url</dt>", "<dt>trigger.poll.items</dt>", "<dt>trigger.poll.key</dt>",
		"<code>POLL</code>")
}
