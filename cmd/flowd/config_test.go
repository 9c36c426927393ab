package main

import (
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := loadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8080" || c.EngineURL != "http://127.0.0.1:8080" || c.DataDir != ".flowd" ||
		c.Workers != 64 || c.AllowPrivate || c.RunPolicy.WithDefaults().Timeout != 5*time.Minute || c.SyncTimeout != 25*time.Second || c.MCPWait != 60*time.Second ||
		c.MaxBody != 10<<20 || c.RunPolicy.WithDefaults().Retention != 720*time.Hour || c.RateLimit != 50 || !c.CodeSandbox {
		t.Fatalf("defaults = %+v", c)
	}
	if c, err := loadConfig(env("FLOWD_CODE_SANDBOX", "false")); err != nil || c.CodeSandbox {
		t.Errorf("FLOWD_CODE_SANDBOX=false: %v %v", c.CodeSandbox, err)
	}
	c, err = loadConfig(env("FLOWD_ENGINE_ADDR", "127.0.0.1:9001", "FLOWD_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.1",
		"FLOWD_WORKFLOW_URL", "https://hooks.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if c.EngineURL != "http://127.0.0.1:9001" || c.WorkflowURL != "https://hooks.example.com" ||
		len(c.TrustedProxies) != 2 || c.TrustedProxies[1].String() != "192.0.2.1/32" {
		t.Fatalf("split config = %+v", c)
	}
	for _, tt := range []struct{ k, v, want string }{
		{"FLOWD_ADDR", "8080", "host:port"},
		{"FLOWD_BACKEND", "mongodb", "embedded, postgres, aws"},
		{"FLOWD_BACKEND", "postgres", "FLOWD_DATABASE_URL"},
		{"FLOWD_WORKERS", "0", "1 to 256"},
		{"FLOWD_ALLOW_PRIVATE_NETWORKS", "yes please", "true or false"},
		{"FLOWD_TRUSTED_PROXIES", "proxy.local", "CIDR"},
		{"FLOWD_RUN_TIMEOUT", "-1s", "positive duration"},
		{"FLOWD_MAX_BODY_BYTES", "12", "at least 1024"},
		{"FLOWD_LOG_LEVEL", "loud", "debug, info"},
		{"FLOWD_RATE_LIMIT", "-3", "requests per second"},
		{"FLOWD_MEMORY_LIMIT", "lots", "512MiB"},
		{"FLOWD_MEMORY_LIMIT", "1MiB", "at least 16MiB"},
		{"FLOWD_CODE_SANDBOX", "maybe", "true or false"},
	} {
		if _, err := loadConfig(env(tt.k, tt.v)); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.k) {
			t.Errorf("%s=%q: err = %v, want it named with %q", tt.k, tt.v, err, tt.want)
		}
	}
}

func TestMemoryLimitSizes(t *testing.T) {
	for v, want := range map[string]int64{"536870912": 512 << 20, "512MiB": 512 << 20, "2GiB": 2 << 30, "64KiB": 64 << 10, "100B": 100} {
		if got, err := parseBytes(v); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"", "1.5GiB", "-1", "9999999999TiB", "GiB"} {
		if _, err := parseBytes(v); err == nil {
			t.Errorf("parseBytes(%q) accepted", v)
		}
	}
	c, err := loadConfig(func(k string) string {
		if k == "FLOWD_MEMORY_LIMIT" {
			return "1GiB"
		}
		return ""
	})
	if err != nil || c.MemoryLimit != 1<<30 {
		t.Errorf("FLOWD_MEMORY_LIMIT=1GiB: %d, %v", c.MemoryLimit, err)
	}
}

func TestOIDCConfig(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := loadConfig(env("FLOWD_OIDC_ISSUER", "https://id.example.com", "FLOWD_OIDC_CLIENT_ID", "flows",
		"FLOWD_OIDC_CLIENT_SECRET", "s", "FLOWD_OIDC_ALLOWED_DOMAINS", "Corp.example, b.example"))
	if err != nil {
		t.Fatal(err)
	}
	if c.OIDC == nil || c.OIDC.ViewerProject != "default" || len(c.OIDC.AllowedDomains) != 2 || c.OIDC.AllowedDomains[0] != "corp.example" {
		t.Fatalf("OIDC %+v", c.OIDC)
	}
	for _, bad := range [][]string{
		{"FLOWD_OIDC_ISSUER", "https://id.example.com"},
		{"FLOWD_OIDC_ISSUER", "id.example.com", "FLOWD_OIDC_CLIENT_ID", "x", "FLOWD_OIDC_CLIENT_SECRET", "y"},
		{"FLOWD_OIDC_ISSUER", "https://id.example.com", "FLOWD_OIDC_CLIENT_ID", "x", "FLOWD_OIDC_CLIENT_SECRET", "y", "FLOWD_OIDC_ALLOWED_DOMAINS", "a@b.example"},
	} {
		if _, err := loadConfig(env(bad...)); err == nil || !strings.Contains(err.Error(), "FLOWD_OIDC") {
			t.Errorf("%v: err = %v, want one naming the setting", bad, err)
		}
	}
	if c, err := loadConfig(env()); err != nil || c.OIDC != nil {
		t.Errorf("no issuer: OIDC %+v err %v, want off", c.OIDC, err)
	}
}
