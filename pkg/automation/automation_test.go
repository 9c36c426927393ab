package automation

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCanonicalAllowlist(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{"ipv4 and cidr", []string{"203.0.113.7", "10.1.2.3/8"}, []string{"203.0.113.7", "10.0.0.0/8"}, ""},
		{"ipv6 and mapped", []string{"2001:db8::1", "::ffff:192.0.2.1", "2001:db8::/32"}, []string{"2001:db8::1", "192.0.2.1", "2001:db8::/32"}, ""},
		{"duplicates folded", []string{"192.0.2.1", "192.0.2.1"}, []string{"192.0.2.1"}, ""},
		{"empty lifts", []string{}, []string{}, ""},
		{"hostname", []string{"example.com"}, nil, `allowedIPs[0] = "example.com"`},
		{"bad prefix", []string{"10.0.0.0/33"}, nil, "CIDR"},
		{"zone", []string{"fe80::1%eth0"}, nil, "allowedIPs[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalAllowlist(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("CanonicalAllowlist(%q) error = %v, want ErrInvalid containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("CanonicalAllowlist(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
	if _, err := CanonicalAllowlist(make([]string, MaxAllowedIPs+1)); err == nil {
		t.Fatal("an allowlist above the maximum was accepted")
	}
}

func TestCursorsRejectForgeryAndOtherScopes(t *testing.T) {
	c := cursors{key: []byte(strings.Repeat("k", 32))}
	other := cursors{key: []byte(strings.Repeat("o", 32))}
	cur := c.seal("prj_a/flows", "42")
	if pos, err := c.open("prj_a/flows", cur); err != nil || pos != "42" {
		t.Fatalf("open(seal(42)) = %q, %v", pos, err)
	}
	payload, sig, _ := strings.Cut(cur, ".")
	forged := c.seal("x", "43")
	forgedPayload, _, _ := strings.Cut(forged, ".")
	for name, bad := range map[string]string{
		"other project":   cur,
		"other key":       other.seal("prj_a/flows", "42"),
		"swapped payload": forgedPayload + "." + sig,
		"no signature":    payload,
		"garbage":         "!!!.???",
	} {
		scope := "prj_a/flows"
		if name == "other project" {
			scope = "prj_b/flows"
		}
		if _, err := c.open(scope, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: open = %v, want ErrInvalid", name, err)
		}
	}
}

func TestSecretNeverMarshals(t *testing.T) {
	a := Authentication{Type: AuthHeader, Name: "X-Webhook-Secret", Value: "hunter2"}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hunter2") || !strings.Contains(string(b), SecretMask) {
		t.Fatalf("marshal = %s, want the value masked", b)
	}
	if s := Secret("hunter2").String(); s != SecretMask {
		t.Fatalf("String() = %q", s)
	}
}

func TestExtractSecretsKeepsMaskedValues(t *testing.T) {
	f := Flow{Trigger: Trigger{Type: TriggerWebhook, Webhook: &Webhook{
		Authentication: &Authentication{Type: AuthBasic, Username: "u", Password: SecretMask},
		Signature:      &Signature{Preset: PresetGitHub, Secret: "new-secret"},
	}}}
	got, err := extractSecrets(&f, map[string]string{"trigger.authentication.password": "old-pass"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"trigger.authentication.password": "old-pass", "trigger.signature.secret": "new-secret"}
	if len(got) != len(want) || got["trigger.authentication.password"] != "old-pass" || got["trigger.signature.secret"] != "new-secret" {
		t.Fatalf("extractSecrets = %v, want %v", got, want)
	}
	if f.Trigger.Webhook.Signature.Secret != SecretMask {
		t.Fatalf("secret left in the flow: %q", f.Trigger.Webhook.Signature.Secret.Reveal())
	}
	if _, err := extractSecrets(&f, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a mask with nothing stored: err = %v, want ErrInvalid", err)
	}
}

func TestSuccessRate(t *testing.T) {
	for _, tt := range []struct {
		ok, all int64
		want    float64
	}{{0, 0, 0}, {1, 1, 100}, {986, 1000, 98.6}, {2, 3, 66.7}} {
		if got := SuccessRate(tt.ok, tt.all); got != tt.want {
			t.Errorf("SuccessRate(%d, %d) = %v, want %v", tt.ok, tt.all, got, tt.want)
		}
	}
}

func TestRoutes(t *testing.T) {
	f := Flow{Engine: WorkflowBuilder, Trigger: Trigger{Type: TriggerWebhook, Webhook: &Webhook{HTTPMethod: MethodAny, Path: "a/b"}}}
	if got := f.Routes(); len(got) != 6 || got[0] != (Route{"a/b", "GET"}) || got[3] != (Route{"a/b", "PATCH"}) {
		t.Fatalf("ANY routes = %v", got)
	}
	f.Engine = FlowBuilder
	if got := f.Routes(); got != nil {
		t.Fatalf("flow builder routes = %v, want none", got)
	}
}
