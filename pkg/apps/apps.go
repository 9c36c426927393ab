// Package apps is the app catalog the binary ships (docs/apps.md): one JSON
// file per app under catalog/, each its connection and its actions. Adding
// an app is adding one file and its test (apps_test.go).
package apps

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowdef"
)

//go:embed catalog/*.json
var files embed.FS

// Bounds of the catalog: each app has 2 to MaxActions actions.
const (
	MinActions = 2
	MaxActions = 5
)

var appKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// Catalog is the loaded catalog; it implements automation.AppCatalog.
type Catalog struct {
	apps    []automation.App
	byKey   map[string]int
	actions map[string]action
}

type action struct {
	a      automation.Action
	schema *flowdef.JSONSchema
}

var _ automation.AppCatalog = (*Catalog)(nil)

// Load reads the embedded catalog. An error is a defect of a catalog file
// (its test fails first).
func Load() (*Catalog, error) { return load(files) }

// MustLoad is Load for the wiring, where the catalog is part of the binary.
func MustLoad() *Catalog {
	c, err := Load()
	if err != nil {
		panic(err)
	}
	return c
}

func load(fsys fs.FS) (*Catalog, error) {
	names, err := fs.Glob(fsys, "catalog/*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	c := &Catalog{byKey: map[string]int{}, actions: map[string]action{}}
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		a, err := parseApp(strings.TrimSuffix(path.Base(name), ".json"), b)
		if err != nil {
			return nil, fmt.Errorf("apps: %s: %w", name, err)
		}
		c.byKey[a.Key] = len(c.apps)
		c.apps = append(c.apps, a)
		for _, act := range a.Actions {
			s, err := flowdef.ParseSchema(act.Input)
			if err != nil {
				return nil, fmt.Errorf("apps: %s: %s: %w", name, act.Key, err)
			}
			c.actions[act.Key] = action{a: act, schema: s}
		}
	}
	return c, nil
}

// parseApp decodes one file strictly and checks what the executor relies
// on: the key is the file's name, every action's key starts with it.
func parseApp(key string, b []byte) (automation.App, error) {
	var a automation.App
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, err
	}
	switch {
	case a.Key != key || !appKeyRE.MatchString(a.Key):
		return a, fmt.Errorf("key %q: must be the file's name, lower case", a.Key)
	case a.Name == "":
		return a, fmt.Errorf("name is required")
	case len(a.Actions) < MinActions || len(a.Actions) > MaxActions:
		return a, fmt.Errorf("%d actions: an app has %d to %d", len(a.Actions), MinActions, MaxActions)
	case len(a.Connection.AllowedHosts) == 0:
		return a, fmt.Errorf("connection.allowedHosts: an app's credential is fenced to its hosts")
	}
	if _, err := automation.ParseAllowedHosts("connection.allowedHosts", a.Connection.AllowedHosts); err != nil {
		return a, err
	}
	if a.Connection.Type == automation.ConnectionOAuth2 && a.Connection.OAuth2 == nil {
		return a, fmt.Errorf("connection.oauth2 is required for an OAUTH2 app")
	}
	seen := map[string]bool{}
	for _, act := range a.Actions {
		if !strings.HasPrefix(act.Key, a.Key+".") || seen[act.Key] {
			return a, fmt.Errorf("action %q: keys are %s.<action>, unique", act.Key, a.Key)
		}
		seen[act.Key] = true
		if act.Title == "" || act.Description == "" {
			return a, fmt.Errorf("action %s: title and description are required", act.Key)
		}
	}
	return a, nil
}

// Apps lists the apps by key.
func (c *Catalog) Apps() []automation.App { return c.apps }

// App returns one app.
func (c *Catalog) App(key string) (automation.App, bool) {
	i, ok := c.byKey[key]
	if !ok {
		return automation.App{}, false
	}
	return c.apps[i], true
}

// Action returns one action and its input schema.
func (c *Catalog) Action(key string) (automation.Action, *flowdef.JSONSchema, bool) {
	a, ok := c.actions[key]
	return a.a, a.schema, ok
}
