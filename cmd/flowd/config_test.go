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
		c.Workers != 4 || c.AllowPrivate || c.RunPolicy.WithDefaults().Timeout != 5*time.Minute || c.SyncTimeout != 25*time.Second ||
		c.MaxBody != 10<<20 || c.RunPolicy.WithDefaults().Retention != 720*time.Hour || c.RateLimit != 50 {
		t.Fatalf("defaults = %+v", c)
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
		{"FLOWD_BACKEND", "postgres", "embedded, aws"},
		{"FLOWD_WORKERS", "0", "1 to 256"},
		{"FLOWD_ALLOW_PRIVATE_NETWORKS", "yes please", "true or false"},
		{"FLOWD_TRUSTED_PROXIES", "proxy.local", "CIDR"},
		{"FLOWD_RUN_TIMEOUT", "-1s", "positive duration"},
		{"FLOWD_MAX_BODY_BYTES", "12", "at least 1024"},
		{"FLOWD_LOG_LEVEL", "loud", "debug, info"},
		{"FLOWD_RATE_LIMIT", "-3", "requests per second"},
	} {
		if _, err := loadConfig(env(tt.k, tt.v)); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.k) {
			t.Errorf("%s=%q: err = %v, want it named with %q", tt.k, tt.v, err, tt.want)
		}
	}
}
