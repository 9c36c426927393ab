// Package cluster holds no code: its test checks the compose file and the
// Kubernetes manifests of this directory, which nothing else reads, so
// that a setting renamed in flowd or a typo in a manifest fails make test
// rather than a reader's first deployment.
package cluster

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// settings are the FLOWD_ variables docs/operations.md documents.
func settings(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("`(FLOWD_[A-Z_]+)`").FindAllStringSubmatch(string(raw), -1) {
		out[m[1]] = true
	}
	return out
}

// plainImage reports whether an image is named without a registry host
// (postgres:16, caddy:2, flowd): the reader's own registry or mirror
// decides where it comes from.
func plainImage(image string) bool {
	first, _, found := strings.Cut(image, "/")
	return image != "" && (!found || !strings.ContainsAny(first, ".:") && first != "localhost")
}

func TestCompose(t *testing.T) {
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string
			Build       struct{ Context, Dockerfile string }
			Environment map[string]string
			Ports       []string
			Volumes     []string
			DependsOn   any `yaml:"depends_on"`
		}
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	// A misspelt key is ignored by a struct, and by an old docker compose:
	// every key is one of the Compose specification's (those used here).
	var loose struct {
		Top      map[string]any `yaml:",inline"`
		Services map[string]map[string]any
	}
	if err := yaml.Unmarshal(raw, &loose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for k := range loose.Top {
		if !strings.HasPrefix(k, "x-") && !slices.Contains([]string{"name", "volumes", "networks"}, k) {
			t.Errorf("compose.yaml: unknown top-level key %q", k)
		}
	}
	serviceKeys := []string{"image", "build", "restart", "depends_on", "environment", "ports", "volumes", "healthcheck", "command"}
	for name, s := range loose.Services {
		for k := range s {
			if !slices.Contains(serviceKeys, k) {
				t.Errorf("compose.yaml: service %s: unknown key %q", name, k)
			}
		}
	}
	known := settings(t)
	var nodes []string
	for name, s := range compose.Services {
		if !plainImage(s.Image) {
			t.Errorf("service %s: image %q names a registry host", name, s.Image)
		}
		if s.Image != "flowd" {
			continue
		}
		nodes = append(nodes, name)
		if s.Build.Dockerfile == "" {
			t.Errorf("service %s: no build of the flowd image", name)
		} else if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
			t.Errorf("service %s: dockerfile: %v", name, err)
		}
		for k := range s.Environment {
			if !known[k] {
				t.Errorf("service %s sets %s, which docs/operations.md does not document", name, k)
			}
		}
		for _, k := range []string{"FLOWD_BACKEND", "FLOWD_DATABASE_URL", "FLOWD_SECRET_KEY"} {
			if s.Environment[k] == "" {
				t.Errorf("service %s: %s unset", name, k)
			}
		}
		if s.Environment["FLOWD_BACKEND"] != "postgres" {
			t.Errorf("service %s: FLOWD_BACKEND=%q, want postgres", name, s.Environment["FLOWD_BACKEND"])
		}
		if db := s.Environment["FLOWD_DATABASE_URL"]; !strings.Contains(db, "@postgres:5432/") {
			t.Errorf("service %s: FLOWD_DATABASE_URL %q is not the postgres service", name, db)
		}
	}
	slices.Sort(nodes)
	if len(nodes) != 3 {
		t.Fatalf("flowd services %v, want three nodes", nodes)
	}
	if _, ok := compose.Services["postgres"]; !ok {
		t.Error("no postgres service")
	}
	// The load balancer sends to every node.
	caddy, err := os.ReadFile("Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if !strings.Contains(string(caddy), n+":8080") {
			t.Errorf("Caddyfile does not send to %s:8080", n)
		}
	}
	if lb := compose.Services["lb"]; !slices.Contains(lb.Volumes, "./Caddyfile:/etc/caddy/Caddyfile:ro") || len(lb.Ports) == 0 {
		t.Errorf("service lb: volumes %v ports %v, want the Caddyfile mounted and a port published", lb.Volumes, lb.Ports)
	}
}

// object is the part of a Kubernetes object the checks read.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string
	Metadata   struct {
		Name   string
		Labels map[string]string
	}
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Replicas *int
		Selector yaml.Node
		Ports    []struct {
			Name       string
			Port       int
			TargetPort string `yaml:"targetPort"`
		}
		Template struct {
			Metadata struct{ Labels map[string]string }
			Spec     struct {
				Containers []struct {
					Name    string
					Image   string
					Ports   []struct{ Name string }
					Env     []struct{ Name, Value string }
					EnvFrom []struct {
						SecretRef struct{ Name string } `yaml:"secretRef"`
					} `yaml:"envFrom"`
					ReadinessProbe struct {
						HTTPGet struct{ Path, Port string } `yaml:"httpGet"`
					} `yaml:"readinessProbe"`
				}
			}
		}
	}
}

func TestKubernetesManifests(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("k8s", "*.yaml"))
	byKind := map[string][]object{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var o object
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Errorf("%s: an object without apiVersion, kind or name: %+v", f, o)
			}
			byKind[o.Kind] = append(byKind[o.Kind], o)
		}
	}
	for _, kind := range []string{"Deployment", "Service", "Secret", "PodDisruptionBudget"} {
		if len(byKind[kind]) != 1 {
			t.Fatalf("%d %s objects in k8s/, want one", len(byKind[kind]), kind)
		}
	}
	dep, svc, sec := byKind["Deployment"][0], byKind["Service"][0], byKind["Secret"][0]
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Errorf("Deployment replicas %v, want 3", dep.Spec.Replicas)
	}
	for _, k := range []string{"FLOWD_SECRET_KEY", "FLOWD_DATABASE_URL"} {
		if sec.StringData[k] == "" {
			t.Errorf("Secret %s has no %s", sec.Metadata.Name, k)
		}
	}
	pod := dep.Spec.Template.Metadata.Labels
	var sel struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	if err := dep.Spec.Selector.Decode(&sel); err != nil || !subset(sel.MatchLabels, pod) || len(sel.MatchLabels) == 0 {
		t.Errorf("Deployment selector %v does not select its pods %v", sel.MatchLabels, pod)
	}
	var svcSel map[string]string
	if err := svc.Spec.Selector.Decode(&svcSel); err != nil || !subset(svcSel, pod) || len(svcSel) == 0 {
		t.Errorf("Service selector %v does not select the Deployment's pods %v", svcSel, pod)
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("Deployment: %d containers, want flowd alone", len(dep.Spec.Template.Spec.Containers))
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if !plainImage(c.Image) {
		t.Errorf("container image %q names a registry host", c.Image)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != sec.Metadata.Name {
		t.Errorf("container envFrom %+v, want the Secret %s", c.EnvFrom, sec.Metadata.Name)
	}
	known := settings(t)
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for k := range sec.StringData {
		env[k] = "(secret)"
	}
	for k := range env {
		if !known[k] {
			t.Errorf("the pod sets %s, which docs/operations.md does not document", k)
		}
	}
	if env["FLOWD_BACKEND"] != "postgres" {
		t.Errorf("FLOWD_BACKEND=%q, want postgres", env["FLOWD_BACKEND"])
	}
	ports := map[string]bool{}
	for _, p := range c.Ports {
		ports[p.Name] = true
	}
	for _, p := range svc.Spec.Ports {
		if !ports[p.TargetPort] {
			t.Errorf("Service port %s targets %q, which the container does not name", p.Name, p.TargetPort)
		}
	}
	if c.ReadinessProbe.HTTPGet.Path != "/healthz" || !ports[c.ReadinessProbe.HTTPGet.Port] {
		t.Errorf("readiness probe %+v, want GET /healthz on a named port", c.ReadinessProbe.HTTPGet)
	}
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestDockerfile: the image builds flowd with the Go of go.mod.
func TestDockerfile(t *testing.T) {
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goVer == nil {
		t.Fatal("go.mod has no go directive")
	}
	for _, want := range []string{"FROM golang:" + string(goVer[1]) + " ", "./cmd/flowd"} {
		if !strings.Contains(string(df), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(string(df), -1) {
		if !plainImage(m[1]) {
			t.Errorf("Dockerfile: image %q names a registry host", m[1])
		}
	}
}
