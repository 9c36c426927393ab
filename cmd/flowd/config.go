package main

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/dashboard"
	"flowservice/pkg/mcpserver"
	"flowservice/pkg/pgstore"
	"flowservice/pkg/sealedsecrets"
)

// config is flowd's configuration, read from FLOWD_* environment variables
// only here, in main.
type config struct {
	Addr           string // management API, and every surface unless split
	EngineAddr     string // flow builder receiver ("" = Addr)
	WorkflowAddr   string // workflow builder receiver ("" = Addr)
	EngineURL      string // public base of the flow builder receiver
	WorkflowURL    string // public base of the workflow builder receiver
	DataDir        string
	Backend        string        // embedded, postgres or aws
	DatabaseURL    string        // postgres: FLOWD_DATABASE_URL
	SecretKey      []byte        // postgres: FLOWD_SECRET_KEY, decoded (sealedsecrets.KeySize bytes)
	DutyLease      time.Duration // postgres: how long a node holds a cluster duty (FLOWD_DUTY_LEASE)
	Workers        int
	TrustedProxies []netip.Prefix
	// OIDC is the dashboard's OpenID Connect sign-in; nil unless
	// FLOWD_OIDC_ISSUER is set (docs/access.md#people).
	OIDC          *dashboard.OIDC
	AllowPrivate  bool
	LogLevel      string
	ShutdownGrace time.Duration
	RunPolicy     automation.RunPolicy // FLOWD_RUN_*; zero fields are the domain's defaults
	SyncTimeout   time.Duration        // how long ON_COMPLETION webhooks wait
	MCPWait       time.Duration        // how long an MCP tools/call waits for its run
	MaxBody       int64                // webhook body limit in bytes
	RateLimit     float64              // management requests per second per project; 0 for none
	MetricsToken  string               // bearer token for GET /metrics; "" = open on loopback only
	MemoryLimit   int64                // soft memory limit in bytes; 0 = none
	CodeSandbox   bool                 // run CODE steps in sandbox child processes (default true)
	// Memory is the memory budget and the limit it comes from, decided
	// at start-up from the process's real limits (membudget.go), not read
	// from a setting.
	Memory memoryLimit
}

// loadConfig reads the environment through getenv, applying the documented
// defaults and refusing values it cannot use.
func loadConfig(getenv func(string) string) (config, error) {
	c := config{
		Addr:          or(getenv("FLOWD_ADDR"), "127.0.0.1:8080"),
		EngineAddr:    getenv("FLOWD_ENGINE_ADDR"),
		WorkflowAddr:  getenv("FLOWD_WORKFLOW_ADDR"),
		DataDir:       or(getenv("FLOWD_DATA_DIR"), ".flowd"),
		Backend:       or(getenv("FLOWD_BACKEND"), "embedded"),
		LogLevel:      or(getenv("FLOWD_LOG_LEVEL"), "info"),
		ShutdownGrace: 20 * time.Second,
	}
	for _, a := range []struct{ name, v string }{{"FLOWD_ADDR", c.Addr}, {"FLOWD_ENGINE_ADDR", c.EngineAddr}, {"FLOWD_WORKFLOW_ADDR", c.WorkflowAddr}} {
		if a.v == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			return c, fmt.Errorf("%s=%q: want host:port, e.g. 127.0.0.1:8080", a.name, a.v)
		}
	}
	c.EngineURL = or(getenv("FLOWD_ENGINE_URL"), "http://"+or(c.EngineAddr, c.Addr))
	c.WorkflowURL = or(getenv("FLOWD_WORKFLOW_URL"), "http://"+or(c.WorkflowAddr, c.Addr))
	switch c.Backend {
	case "embedded", "aws":
	case "postgres":
		if err := c.loadPostgres(getenv); err != nil {
			return c, err
		}
	default:
		return c, fmt.Errorf("FLOWD_BACKEND=%q: allowed values are embedded, postgres, aws", c.Backend)
	}
	workers, err := strconv.Atoi(or(getenv("FLOWD_WORKERS"), "64"))
	if err != nil || workers < 1 || workers > 256 {
		return c, fmt.Errorf("FLOWD_WORKERS=%q: want an integer from 1 to 256", getenv("FLOWD_WORKERS"))
	}
	c.Workers = workers
	if v := getenv("FLOWD_ALLOW_PRIVATE_NETWORKS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("FLOWD_ALLOW_PRIVATE_NETWORKS=%q: want true or false", v)
		}
		c.AllowPrivate = b
	}
	for _, s := range strings.Split(getenv("FLOWD_TRUSTED_PROXIES"), ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return c, fmt.Errorf("FLOWD_TRUSTED_PROXIES: %q is neither an address nor a CIDR range", s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		c.TrustedProxies = append(c.TrustedProxies, p.Masked())
	}
	if issuer := getenv("FLOWD_OIDC_ISSUER"); issuer != "" {
		o := &dashboard.OIDC{Issuer: issuer, ClientID: getenv("FLOWD_OIDC_CLIENT_ID"), ClientSecret: getenv("FLOWD_OIDC_CLIENT_SECRET"),
			ViewerProject: getenv("FLOWD_OIDC_VIEWER_PROJECT")}
		if o.ClientID == "" || o.ClientSecret == "" {
			return c, fmt.Errorf("FLOWD_OIDC_ISSUER is set: FLOWD_OIDC_CLIENT_ID and FLOWD_OIDC_CLIENT_SECRET are needed too")
		}
		if u, err := url.Parse(issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return c, fmt.Errorf("FLOWD_OIDC_ISSUER=%q: want the provider's issuer URL, such as https://accounts.google.com", issuer)
		}
		if o.ViewerProject == "" {
			o.ViewerProject = automation.DefaultProject
		}
		for _, d := range strings.Split(getenv("FLOWD_OIDC_ALLOWED_DOMAINS"), ",") {
			if d = strings.ToLower(strings.TrimSpace(d)); d != "" {
				if strings.ContainsAny(d, "@/ ") || !strings.Contains(d, ".") {
					return c, fmt.Errorf("FLOWD_OIDC_ALLOWED_DOMAINS: %q is not an email domain such as example.com", d)
				}
				o.AllowedDomains = append(o.AllowedDomains, d)
			}
		}
		c.OIDC = o
	}
	var err2 error
	// The run policy is read as the Lambdas read it, with the FLOWD_
	// prefix; FLOWD_RETENTION is the documented name of FLOWD_RUN_RETENTION.
	if c.RunPolicy, err2 = automation.ParseRunPolicy(func(k string) string {
		if k == "FLOWD_RUN_RETENTION" && getenv(k) == "" {
			return getenv("FLOWD_RETENTION")
		}
		return getenv(k)
	}, "FLOWD_"); err2 != nil {
		return c, err2
	}
	if c.SyncTimeout, err2 = duration(getenv, "FLOWD_SYNC_TIMEOUT", 25*time.Second); err2 != nil {
		return c, err2
	}
	if c.MCPWait, err2 = duration(getenv, "FLOWD_MCP_WAIT", mcpserver.DefaultWait); err2 != nil {
		return c, err2
	}
	maxBody, err := strconv.ParseInt(or(getenv("FLOWD_MAX_BODY_BYTES"), "10485760"), 10, 64)
	if err != nil || maxBody < 1024 {
		return c, fmt.Errorf("FLOWD_MAX_BODY_BYTES=%q: want a number of bytes, at least 1024", getenv("FLOWD_MAX_BODY_BYTES"))
	}
	c.MaxBody = maxBody
	if c.RateLimit, err = strconv.ParseFloat(or(getenv("FLOWD_RATE_LIMIT"), "50"), 64); err != nil || c.RateLimit < 0 {
		return c, fmt.Errorf("FLOWD_RATE_LIMIT=%q: want requests per second per project, 0 for no limit", getenv("FLOWD_RATE_LIMIT"))
	}
	c.MetricsToken = getenv("FLOWD_METRICS_TOKEN")
	if v := getenv("FLOWD_MEMORY_LIMIT"); v != "" {
		if c.MemoryLimit, err = parseBytes(v); err != nil || c.MemoryLimit < 16<<20 {
			return c, fmt.Errorf("FLOWD_MEMORY_LIMIT=%q: want a size of at least 16MiB, such as 512MiB or 2GiB", v)
		}
	}
	c.CodeSandbox = true
	if v := getenv("FLOWD_CODE_SANDBOX"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("FLOWD_CODE_SANDBOX=%q: want true or false", v)
		}
		c.CodeSandbox = b
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return c, fmt.Errorf("FLOWD_LOG_LEVEL=%q: allowed values are debug, info, warn, error", c.LogLevel)
	}
	c.DataDir = filepath.Clean(c.DataDir)
	return c, nil
}

// secretKeyHelp says how to make a FLOWD_SECRET_KEY.
const secretKeyHelp = "want 32 random bytes in standard base64, the same on every node (make one with: head -c 32 /dev/urandom | base64)"

// loadPostgres reads the settings of flowd nodes on PostgreSQL. Neither the
// URL (it may hold a password) nor the key is ever echoed in an error.
func (c *config) loadPostgres(getenv func(string) string) error {
	c.DatabaseURL = getenv("FLOWD_DATABASE_URL")
	if c.DatabaseURL == "" {
		return fmt.Errorf("FLOWD_BACKEND=postgres needs FLOWD_DATABASE_URL (postgres://user:password@host:5432/database)")
	}
	v := strings.TrimSpace(getenv("FLOWD_SECRET_KEY"))
	if v == "" {
		return fmt.Errorf("FLOWD_BACKEND=postgres needs FLOWD_SECRET_KEY: %s", secretKeyHelp)
	}
	key, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(key) != sealedsecrets.KeySize {
		return fmt.Errorf("FLOWD_SECRET_KEY: %s", secretKeyHelp)
	}
	c.SecretKey = key
	// A shorter lease makes takeover faster and costs a write per node
	// every quarter of it.
	if c.DutyLease, err = duration(getenv, "FLOWD_DUTY_LEASE", pgstore.DutyLease); err != nil {
		return err
	}
	if c.DutyLease < time.Second || c.DutyLease > 5*time.Minute {
		return fmt.Errorf("FLOWD_DUTY_LEASE=%q: want a duration from 1s to 5m", getenv("FLOWD_DUTY_LEASE"))
	}
	return nil
}

// duration reads a Go duration such as 90s or 720h, positive.
func duration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 90s, 5m or 720h", name, v)
	}
	return d, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// parseBytes reads a size as GOMEMLIMIT writes it: a number of bytes with
// an optional B, KiB, MiB, GiB or TiB suffix.
func parseBytes(v string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q", v)
	}
	return n * mult, nil
}
