package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// usage is what flowd --help prints. flowd takes no arguments: its
// configuration is the environment, so that the Makefile, systemd units and
// containers all set it the same way.
const usage = `flowd: the flow service on one machine (management API, dashboard, webhook receivers).

Usage: flowd            start the server (stop it with Ctrl-C)
       flowd --help     print this help
       flowd --version  print the version

Configuration is environment variables (defaults in brackets; docs/operations.md explains each):
  FLOWD_ADDR            address of the API, the dashboard and the receivers [127.0.0.1:8080]
  FLOWD_DATA_DIR        data directory: SQLite store, secrets key, initial API key [.flowd]
  FLOWD_ENGINE_ADDR, FLOWD_WORKFLOW_ADDR   separate addresses for the receivers
  FLOWD_ENGINE_URL, FLOWD_WORKFLOW_URL     public URLs in webhook descriptors [http://FLOWD_ADDR]
  FLOWD_WORKERS [64], FLOWD_RUN_TIMEOUT [5m], FLOWD_RUN_ATTEMPTS [5]
  FLOWD_RETENTION (or FLOWD_RUN_RETENTION) [720h]    how long run records are kept
  FLOWD_RUN_BACKOFF [2s], FLOWD_RUN_MAX_BACKOFF [5m]  delay before a retry, doubling to the maximum
  FLOWD_RUN_MAX_CRASHES [3]   attempts that die with their process before the run is FAILED
  FLOWD_SYNC_TIMEOUT [25s], FLOWD_MAX_BODY_BYTES [10485760], FLOWD_RATE_LIMIT [50]
  FLOWD_MCP_WAIT [60s]  how long an MCP client's tools/call waits for its run (the run goes on)
  FLOWD_TRUSTED_PROXIES, FLOWD_ALLOW_PRIVATE_NETWORKS [false], FLOWD_LOG_LEVEL [info]
  FLOWD_OIDC_ISSUER, FLOWD_OIDC_CLIENT_ID, FLOWD_OIDC_CLIENT_SECRET   OpenID Connect sign-in [off]
  FLOWD_OIDC_ALLOWED_DOMAINS   email domains let in as viewers of FLOWD_OIDC_VIEWER_PROJECT [default]
  FLOWD_METRICS_TOKEN   bearer token for GET /metrics [none: open on a loopback FLOWD_ADDR only]
  FLOWD_MEMORY_LIMIT    soft memory limit such as 512MiB [none; GOMEMLIMIT wins]; GOGC [200]
                        the memory budget (runs under way, webhook bodies in flight) is the
                        tightest of: this or GOMEMLIMIT; half of cgroup v2 memory.max, cgroup v1
                        memory.limit_in_bytes, RLIMIT_AS (ulimit -v), the machine's RAM
  FLOWD_CODE_SANDBOX    run CODE steps in sandboxed child processes; false turns them off [true]
  FLOWD_PPROF_ADDR      loopback address for Go's /debug/pprof/ [off]
  FLOWD_BACKEND         embedded (SQLite), postgres (nodes on one PostgreSQL), or aws (DynamoDB, SQS,
                        Secrets Manager; AWS_ENDPOINT_URL honoured) [embedded]
  FLOWD_DATABASE_URL    with postgres: postgres://user:password@host:5432/database [required]
  FLOWD_SECRET_KEY      with postgres: 32 random bytes in base64, the same on every node; seals
                        credentials (make one: head -c 32 /dev/urandom | base64) [required]
  FLOWD_DUTY_LEASE      with postgres: how long a node holds cron, POLL, alert and retention duties
                        without renewing (renewed every quarter of it) [20s]
  FLOWD_AWS_PROVISION   with the aws backend, create its resources first [false]
  FLOWD_AWS_PREFIX      the prefix of the resources FLOWD_AWS_PROVISION creates [flowd]
  OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)   OpenTelemetry traces
                        over OTLP/HTTP, with the other standard OTEL_* variables [off]

On first start with an empty data directory flowd creates project "default" and prints its
first API key, also written to FLOWD_DATA_DIR/initial-api-key. The dashboard is at /ui/.
`

// commandLine handles flowd's only arguments, --help and --version, before
// anything is read or created. done says the command is complete. --help
// ends with the memory budget flowd would take here and now, read through
// mem (systemMemory in flowd) with FLOWD_MEMORY_LIMIT from its getenv.
func commandLine(args []string, stdout io.Writer, mem memorySources) (done bool, err error) {
	if len(args) == 0 {
		return false, nil
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		var flowdLimit int64
		if mem.Getenv != nil {
			if v := mem.Getenv("FLOWD_MEMORY_LIMIT"); v != "" {
				flowdLimit, _ = parseBytes(v) // a bad value stops the start, naming it
			}
		}
		fmt.Fprintf(stdout, "\nMemory budget here: %s.\n", decideMemory(mem, flowdLimit))
		return true, nil
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, "flowd", version())
		return true, nil
	}
	return true, fmt.Errorf("unknown argument %q: flowd is configured with FLOWD_* environment variables (see flowd --help)", args[0])
}

// version is the module version and VCS revision the binary was built from.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v, rev, dirty := bi.Main.Version, "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev
		if dirty {
			v += "+dirty"
		}
	}
	return v + " " + bi.GoVersion
}
