package engine

import (
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"

	"flowservice/pkg/automation"
)

// UserAgent is what outbound requests say of their sender:
// "flowd/<version> (+<base>)", base being the service's public URL, so
// that a service a flow calls can tell who calls it and where to complain.
func UserAgent(publicURL string) string {
	ua := "flowd/" + buildVersion()
	if u, err := url.Parse(publicURL); err == nil && u.Scheme != "" && u.Host != "" {
		ua += " (+" + u.Scheme + "://" + u.Host + ")"
	}
	return ua
}

// buildVersion is the module version, or the VCS revision of a development
// build, as one token.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return s.Value[:12]
		}
	}
	return "dev"
}

// identify marks an outbound request with who sends it: the service and
// version, the run, and the run's depth in a chain of flows plus one. They
// are set last, over the step's own headers, so that a flow cannot pass
// itself off as something else or reset the depth that stops loops.
func (x *execution) identify(req *http.Request) {
	req.Header.Set("User-Agent", x.e.userAgent)
	req.Header.Set(automation.FlowRunHeader, x.run.ID)
	req.Header.Set(automation.FlowDepthHeader, strconv.Itoa(x.run.Trigger.Depth()+1))
}
